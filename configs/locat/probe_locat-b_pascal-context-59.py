# The papers' frozen probe (spec/locat.md section 4) on LocAtViT-B.
_base_ = '../_base_/seg/probe_pascal-context-59-480x480_20k.py'

model = dict(
    backbone=dict(
        arch='b',
        init_cfg=dict(
            type='Pretrained',
            checkpoint='checkpoints/locat-b_in1k.pth',
            prefix='backbone.')),
    decode_head=dict(in_channels=768))
