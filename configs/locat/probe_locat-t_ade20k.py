# The papers' frozen probe (spec/locat.md section 4) on LocAtViT-T.
_base_ = '../_base_/seg/probe_ade20k-512x512_20k.py'

model = dict(
    backbone=dict(
        arch='t',
        init_cfg=dict(
            type='Pretrained',
            checkpoint='checkpoints/locat-t_in1k.pth',
            prefix='backbone.')),
    decode_head=dict(in_channels=192))
