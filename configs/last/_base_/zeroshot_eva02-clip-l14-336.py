# Zero-shot segmentation with a frozen EVA02-CLIP L/14-336: the EVA02 B/16
# protocol with the large tower and its 336-px window (stride 112).
_base_ = ['./zeroshot_eva02-clip-b16.py']
model = dict(
    backbone=dict(
        arch='l',
        img_size=336,
        init_cfg=dict(
            checkpoint='checkpoints/eva02-clip-l14-336_mmlocat.pth')),
    test_cfg=dict(crop_size=(336, 336)))
