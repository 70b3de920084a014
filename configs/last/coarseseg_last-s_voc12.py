# Coarse segmentation (LaSt-ViT Tab. 6: ViT-S 29.5 -> 41.9, the paper's),
# supervised LaSt-ViT-S/16, VOC12 val: the DINO config (padded patches) with
# mmpretrain's position-embedding resize (supervised weights, not DINO's).
# CKPT: your LaSt-ViT-S/16 (keys under `backbone.`).
_base_ = './coarseseg_last-dino-s_voc12.py'
model = dict(backbone=dict(pos_embed_cfg=dict(resample='host')))
