# F-ViT, frozen EVA02-CLIP L/14-336 with LaSt weights, OV-LVIS: identical
# to fvit_eva02-clip-l14-336_ov-lvis.py but for the backbone checkpoint.
_base_ = './fvit_eva02-clip-l14-336_ov-lvis.py'
model = dict(
    backbone=dict(
        init_cfg=dict(
            checkpoint='checkpoints/last-eva02-clip-l14-336_mmlocat.pth')))
