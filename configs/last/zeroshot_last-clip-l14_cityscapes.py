# Zero-shot seg., OpenAI CLIP ViT-L/14 with LaSt weights, Cityscapes:
# the baseline config but for the checkpoint.
_base_ = './zeroshot_clip-l14_cityscapes.py'
model = dict(
    backbone=dict(
        init_cfg=dict(checkpoint='checkpoints/last-clip-vit-l14_mmlocat.pth')))
