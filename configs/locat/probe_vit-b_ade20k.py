# The plain-ViT twin of probe_locat-b_ade20k.py: same probe, GAug and PRR off,
# plain ViT-B weights.
_base_ = './probe_locat-b_ade20k.py'

model = dict(
    backbone=dict(
        gaug=False,
        prr=False,
        init_cfg=dict(checkpoint='checkpoints/vit-b_in1k.pth')))
