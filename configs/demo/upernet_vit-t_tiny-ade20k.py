# The plain-ViT twin of the demo: the same run with GAug and PRR off.
_base_ = './upernet_locat-t_tiny-ade20k.py'

model = dict(backbone=dict(gaug=False, prr=False))
