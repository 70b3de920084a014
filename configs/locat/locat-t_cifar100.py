# LocAtViT-T on CIFAR-100 (upsampled to 224), 600 epochs.
_base_ = './_base_/locat_cifar100.py'

model = dict(
    backbone=dict(arch='t', drop_path_rate=0.1), head=dict(in_channels=192))
