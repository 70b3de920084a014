# LocAtViT-S on ImageNet-1k (drop path 0.2).
_base_ = './_base_/locat_in1k.py'

model = dict(
    backbone=dict(arch='deit-small', drop_path_rate=0.2),
    head=dict(in_channels=384))
