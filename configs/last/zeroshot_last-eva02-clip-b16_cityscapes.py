# Zero-shot seg., EVA02-CLIP B/16 with LaSt weights, Cityscapes:
# the baseline config but for the checkpoint.
_base_ = './zeroshot_eva02-clip-b16_cityscapes.py'
model = dict(
    backbone=dict(
        init_cfg=dict(
            checkpoint='checkpoints/last-eva02-clip-b16_mmlocat.pth')))
