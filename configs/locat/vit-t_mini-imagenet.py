# Plain ViT-T twin of locat-t_mini-imagenet.py: the identical recipe and
# network with GAug and PRR switched off.
_base_ = './locat-t_mini-imagenet.py'

model = dict(backbone=dict(gaug=False, prr=False))
