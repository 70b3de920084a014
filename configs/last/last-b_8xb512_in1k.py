# LaSt-ViT-B/16 on ImageNet-1k with the public 100-epoch recipe: the global
# token is LazyStrike pooling (top-1 patch per channel, as the released
# weights) of the final-norm patch tokens, not the CLS output.
_base_ = './_base_/last_in1k.py'

model = dict(backbone=dict(arch='b', pooling='lazy_strike', topk=1))
