# F-ViT, frozen CLIP ViT-B/16 with LaSt weights, OV-COCO: identical to
# fvit_clip-b16_ov-coco.py but for the backbone checkpoint.
_base_ = './fvit_clip-b16_ov-coco.py'
model = dict(
    backbone=dict(
        init_cfg=dict(checkpoint='checkpoints/last-clip-vit-b16_mmlocat.pth')))
