# F-ViT, frozen EVA02-CLIP L/14-336 fine-tuned with the CLS token
# (configs/last/clip_cls-*), OV-COCO: the same-recipe twin of
# fvit_last-eva02-clip-l14-336_ov-coco.py, all but the backbone checkpoint.
_base_ = './fvit_last-eva02-clip-l14-336_ov-coco.py'
model = dict(
    backbone=dict(
        init_cfg=dict(
            checkpoint='checkpoints/cls-eva02-clip-l14-336_mmlocat.pth')))
