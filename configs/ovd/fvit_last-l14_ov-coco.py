# F-ViT, frozen CLIP ViT-L/14 with LaSt weights, OV-COCO: identical to
# fvit_clip-l14_ov-coco.py but for the backbone checkpoint.
_base_ = './fvit_clip-l14_ov-coco.py'
model = dict(
    backbone=dict(
        init_cfg=dict(checkpoint='checkpoints/last-clip-vit-l14_mmlocat.pth')))
