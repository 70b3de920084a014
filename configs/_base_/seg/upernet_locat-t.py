# UperNet + LocAtViT-T/16 (DeiT-T size: 192-d, 12 blocks, 3 heads): the
# LocAtViT-B model at width 192.
_base_ = './upernet_locat-b.py'

model = dict(
    backbone=dict(
        arch='t', init_cfg=dict(checkpoint='checkpoints/locat-t_in1k.pth')),
    neck=dict(in_channels=[192, 192, 192, 192], out_channels=192),
    decode_head=dict(in_channels=[192, 192, 192, 192]),
    auxiliary_head=dict(in_channels=192))
