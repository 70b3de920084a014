# Zero-shot seg., EVA02-CLIP L/14-336 with LaSt weights, Cityscapes:
# the baseline config but for the checkpoint.
_base_ = './zeroshot_eva02-clip-l14-336_cityscapes.py'
model = dict(
    backbone=dict(
        init_cfg=dict(
            checkpoint='checkpoints/last-eva02-clip-l14-336_mmlocat.pth')))
