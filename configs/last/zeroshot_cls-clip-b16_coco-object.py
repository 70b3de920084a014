# Zero-shot seg., OpenAI CLIP ViT-B/16 fine-tuned with the CLS token
# (configs/last/clip_cls-*), COCO-Object: the same-recipe twin of
# zeroshot_last-clip-b16_coco-object.py, all but the checkpoint.
_base_ = './zeroshot_last-clip-b16_coco-object.py'
model = dict(
    backbone=dict(
        init_cfg=dict(checkpoint='checkpoints/cls-clip-vit-b16_mmlocat.pth')))
