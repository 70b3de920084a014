# Coarse segmentation, DINO ViT-S/16 baseline (patch scores against the CLS
# output), VOC12 val: coarseseg_last-dino-s_voc12.py with CLS pooling.
_base_ = './coarseseg_last-dino-s_voc12.py'
model = dict(backbone=dict(pooling='cls'))
