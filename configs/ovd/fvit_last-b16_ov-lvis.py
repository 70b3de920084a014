# F-ViT, frozen CLIP ViT-B/16 with LaSt weights, OV-LVIS: identical to
# fvit_clip-b16_ov-lvis.py but for the backbone checkpoint.
_base_ = './fvit_clip-b16_ov-lvis.py'
model = dict(
    backbone=dict(
        init_cfg=dict(checkpoint='checkpoints/last-clip-vit-b16_mmlocat.pth')))
