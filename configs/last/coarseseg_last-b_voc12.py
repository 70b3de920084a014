# Coarse segmentation, supervised LaSt-ViT-B/16 (the released weights,
# converted by last_vit2mmlocat.py), VOC12 val.
_base_ = './coarseseg_last-s_voc12.py'
model = dict(backbone=dict(arch='b'))
