# The same-recipe plain ViT-B/16 baseline of last-b_8xb512_in1k.py: the
# identical network and recipe, the CLS output as the global token.
_base_ = './last-b_8xb512_in1k.py'

model = dict(backbone=dict(pooling='cls'))
