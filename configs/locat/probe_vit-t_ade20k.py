# The plain-ViT twin of probe_locat-t_ade20k.py: same probe, GAug and PRR off,
# plain ViT-T weights.
_base_ = './probe_locat-t_ade20k.py'

model = dict(
    backbone=dict(
        gaug=False,
        prr=False,
        init_cfg=dict(checkpoint='checkpoints/vit-t_in1k.pth')))
