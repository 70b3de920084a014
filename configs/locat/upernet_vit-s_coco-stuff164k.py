# The plain-ViT twin of upernet_locat-s_coco-stuff164k.py: identical recipe and
# code path, GAug and PRR switched off, plain ViT-S weights.
_base_ = './upernet_locat-s_coco-stuff164k.py'

model = dict(
    backbone=dict(
        gaug=False,
        prr=False,
        init_cfg=dict(checkpoint='checkpoints/vit-s_in1k.pth')))
