# LocAtViT-T on mini-ImageNet, 600 epochs (120 warmup, lr 5e-4).
_base_ = './_base_/locat_mini-imagenet.py'

model = dict(
    backbone=dict(arch='t', drop_path_rate=0.1), head=dict(in_channels=192))
