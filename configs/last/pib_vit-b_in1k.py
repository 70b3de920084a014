# PiB of the plain ViT-B/16 baseline: patch scores are the cosine of the
# final-norm patch tokens with the CLS output (docs/method.md#patch-score),
# read by mmlocat.PatchScoreClassifier from mmlocat.LaStViT(pooling='cls')
# (the plain ViT). The protocol and data of pib_last-b_in1k.py, which is this
# config with pooling='lazy_strike'.
_base_ = ['./_base_/pib_in1k.py']
