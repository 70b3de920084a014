# The papers' frozen probe (docs/method.md#frozen-segmentation-probe) on
# LocAtViT-B, PASCAL Context-59: the probe recipe as it stands (LocAtViT-B is
# its model).
_base_ = '../_base_/seg/probe_pascal-context-59-480x480_20k.py'
