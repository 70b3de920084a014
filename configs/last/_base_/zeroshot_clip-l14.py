# Zero-shot segmentation with a frozen OpenAI CLIP ViT-L/14 (224 px): the
# ViT-B/16 protocol with the large tower, window 224, stride 112.
_base_ = ['./zeroshot_clip-b16.py']
model = dict(
    backbone=dict(
        arch='l',
        patch_size=14,
        init_cfg=dict(checkpoint='checkpoints/clip-vit-l14_mmlocat.pth')))
