# LocAtViT-B on ImageNet-1k (drop path 0.4).
_base_ = './_base_/locat_in1k.py'

model = dict(
    backbone=dict(arch='b', drop_path_rate=0.4), head=dict(in_channels=768))
