# F-ViT, frozen CLIP ViT-L/14 with LaSt weights, OV-LVIS: identical to
# fvit_clip-l14_ov-lvis.py but for the backbone checkpoint.
_base_ = './fvit_clip-l14_ov-lvis.py'
model = dict(
    backbone=dict(
        init_cfg=dict(checkpoint='checkpoints/last-clip-vit-l14_mmlocat.pth')))
