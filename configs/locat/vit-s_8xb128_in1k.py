# Plain ViT-S twin of locat-s_8xb128_in1k.py: the identical recipe and
# network with GAug and PRR switched off.
_base_ = './locat-s_8xb128_in1k.py'

model = dict(backbone=dict(gaug=False, prr=False))
