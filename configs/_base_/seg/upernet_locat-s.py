# UperNet + LocAtViT-S/16 (DeiT-S size: 384-d, 12 blocks, 6 heads): the
# LocAtViT-B model at width 384.
_base_ = './upernet_locat-b.py'

model = dict(
    backbone=dict(
        arch='deit-small',
        init_cfg=dict(checkpoint='checkpoints/locat-s_in1k.pth')),
    neck=dict(in_channels=[384, 384, 384, 384], out_channels=384),
    decode_head=dict(in_channels=[384, 384, 384, 384]),
    auxiliary_head=dict(in_channels=384))
