# Plain ViT-T twin of locat-t_cifar100.py: the identical recipe and network
# with GAug and PRR switched off.
_base_ = './locat-t_cifar100.py'

model = dict(backbone=dict(gaug=False, prr=False))
