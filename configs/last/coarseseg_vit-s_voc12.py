# Coarse segmentation, supervised ViT-S/16 baseline (CLS pooling and
# scores), VOC12 val: coarseseg_last-s_voc12.py with CLS pooling.
_base_ = './coarseseg_last-s_voc12.py'
model = dict(backbone=dict(pooling='cls'))
