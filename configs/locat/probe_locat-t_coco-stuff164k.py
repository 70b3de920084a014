# The papers' frozen probe on LocAtViT-T, COCO-Stuff-164k:
# probe_locat-b_coco-stuff164k.py at width 192.
_base_ = './probe_locat-b_coco-stuff164k.py'

model = dict(
    backbone=dict(
        arch='t', init_cfg=dict(checkpoint='checkpoints/locat-t_in1k.pth')),
    decode_head=dict(in_channels=192))
