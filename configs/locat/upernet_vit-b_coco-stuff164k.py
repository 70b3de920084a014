# The plain-ViT twin of upernet_locat-b_coco-stuff164k.py: identical recipe and
# code path, GAug and PRR switched off, plain ViT-B weights.
_base_ = './upernet_locat-b_coco-stuff164k.py'

model = dict(
    backbone=dict(
        gaug=False,
        prr=False,
        init_cfg=dict(checkpoint='checkpoints/vit-b_in1k.pth')))
