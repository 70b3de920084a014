# Zero-shot segmentation with a frozen EVA02-CLIP L/14-336: the EVA02 B/16
# protocol with the large tower. The window stays SCLIP's 224 (stride 112;
# the position embeddings are resized to the 16 x 16 grid); the tower's own
# 336 window is an option: test_cfg=dict(crop_size=(336, 336)).
_base_ = ['./zeroshot_eva02-clip-b16.py']
model = dict(
    backbone=dict(
        arch='l',
        img_size=336,
        init_cfg=dict(
            checkpoint='checkpoints/eva02-clip-l14-336_mmlocat.pth')))
