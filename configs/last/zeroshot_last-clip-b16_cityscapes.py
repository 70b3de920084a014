# Zero-shot seg., OpenAI CLIP ViT-B/16 with LaSt weights, Cityscapes:
# the baseline config but for the checkpoint.
_base_ = './zeroshot_clip-b16_cityscapes.py'
model = dict(
    backbone=dict(
        init_cfg=dict(checkpoint='checkpoints/last-clip-vit-b16_mmlocat.pth')))
