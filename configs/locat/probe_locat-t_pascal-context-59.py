# The papers' frozen probe on LocAtViT-T, PASCAL Context-59:
# probe_locat-b_pascal-context-59.py at width 192.
_base_ = './probe_locat-b_pascal-context-59.py'

model = dict(
    backbone=dict(
        arch='t', init_cfg=dict(checkpoint='checkpoints/locat-t_in1k.pth')),
    decode_head=dict(in_channels=192))
