# Zero-shot seg., OpenAI CLIP ViT-B/16 with LaSt weights, ADE20K:
# the baseline config but for the checkpoint.
_base_ = './zeroshot_clip-b16_ade20k.py'
model = dict(
    backbone=dict(
        init_cfg=dict(checkpoint='checkpoints/last-clip-vit-b16_mmlocat.pth')))
