# The papers' frozen probe (spec/locat.md section 4) on LocAtViT-B.
_base_ = '../_base_/seg/probe_coco-stuff164k-512x512_20k.py'

model = dict(
    backbone=dict(
        arch='b',
        init_cfg=dict(
            type='Pretrained',
            checkpoint='checkpoints/locat-b_in1k.pth',
            prefix='backbone.')),
    decode_head=dict(in_channels=768))
