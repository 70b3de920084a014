# LocAtViT-T on ImageNet-1k (drop path 0.1).
_base_ = './_base_/locat_in1k.py'

model = dict(
    backbone=dict(arch='t', drop_path_rate=0.1), head=dict(in_channels=192))
