# Coarse segmentation, supervised ViT-B/16 baseline (CLS pooling and
# scores), VOC12 val: coarseseg_last-b_voc12.py with CLS pooling.
_base_ = './coarseseg_last-b_voc12.py'
model = dict(backbone=dict(pooling='cls'))
