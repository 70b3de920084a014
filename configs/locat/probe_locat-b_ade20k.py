# The papers' frozen probe (docs/method.md#frozen-segmentation-probe) on
# LocAtViT-B, ADE20K: the probe recipe as it stands (LocAtViT-B is its model).
_base_ = '../_base_/seg/probe_ade20k-512x512_20k.py'
