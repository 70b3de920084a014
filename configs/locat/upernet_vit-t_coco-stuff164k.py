# The plain-ViT twin of upernet_locat-t_coco-stuff164k.py: identical recipe and
# code path, GAug and PRR switched off, plain ViT-T weights.
_base_ = './upernet_locat-t_coco-stuff164k.py'

model = dict(
    backbone=dict(
        gaug=False,
        prr=False,
        init_cfg=dict(checkpoint='checkpoints/vit-t_in1k.pth')))
