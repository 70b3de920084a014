# PiB of the plain ViT-B/16 baseline: patch scores are the cosine of the
# final-norm patch tokens with the CLS output (spec/lastvit.md §2), read by
# mmlocat.PatchScoreClassifier from mmpretrain's own VisionTransformer.
# Same protocol and data as pib_last-b_in1k.py.
_base_ = ['./pib_last-b_in1k.py']

model = dict(
    backbone=dict(
        _delete_=True,
        type='VisionTransformer',
        arch='b',
        img_size=224,
        patch_size=16,
        out_type='cls_token'))
