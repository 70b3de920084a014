# The plain-ViT twin of upernet_last-b_ade20k.py:
# identical recipe, backbone class and neck; only the weights (a plain
# ViT-B/16 trained with the same recipe, configs/last/vit-b_8xb512_in1k.py)
# and the neck's global token change. A plain ViT's global token would be
# its CLS output, but the neck only sees feature maps here ('cls' needs raw
# tokens, which must form a square grid, and whole-image tests are not
# square), so the twin scores patches against their mean ('gap'), the
# token-free choice.
_base_ = './upernet_last-b_ade20k.py'

model = dict(
    backbone=dict(
        init_cfg=dict(checkpoint='checkpoints/vit-b_8xb512_in1k.pth')),
    neck=dict(pooling='gap'))
