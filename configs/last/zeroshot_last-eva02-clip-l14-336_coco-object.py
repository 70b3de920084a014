# Zero-shot seg., EVA02-CLIP L/14-336 with LaSt weights, COCO-Object:
# the baseline config but for the checkpoint.
_base_ = './zeroshot_eva02-clip-l14-336_coco-object.py'
model = dict(
    backbone=dict(
        init_cfg=dict(
            checkpoint='checkpoints/last-eva02-clip-l14-336_mmlocat.pth')))
