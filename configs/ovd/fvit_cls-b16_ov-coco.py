# F-ViT, frozen CLIP ViT-B/16 fine-tuned with the CLS token
# (configs/last/clip_cls-*), OV-COCO: the same-recipe twin of
# fvit_last-b16_ov-coco.py, all but the backbone checkpoint.
_base_ = './fvit_last-b16_ov-coco.py'
model = dict(
    backbone=dict(
        init_cfg=dict(checkpoint='checkpoints/cls-clip-vit-b16_mmlocat.pth')))
