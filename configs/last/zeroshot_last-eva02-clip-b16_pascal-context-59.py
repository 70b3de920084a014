# Zero-shot seg., EVA02-CLIP B/16 with LaSt weights, PASCAL Context-59:
# the baseline config but for the checkpoint.
_base_ = './zeroshot_eva02-clip-b16_pascal-context-59.py'
model = dict(
    backbone=dict(
        init_cfg=dict(
            checkpoint='checkpoints/last-eva02-clip-b16_mmlocat.pth')))
