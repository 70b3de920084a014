# UperNet + LaSt-ViT-B/16: the same mmseg ViT-UperNet model as
# upernet_locat-b.py with mmlocat.LaStViT (LaSt weights) as the backbone and
# mmlocat.PatchScoreNeck in place of mmseg's MultiLevelNeck: the same strides
# 4/8/16/32 from blocks 3/6/9/12, plus the LazyStrike patch-score map that
# modulates every level by (1 + gamma * score), gamma starting at 0.
_base_ = './upernet_locat-b.py'

model = dict(
    backbone=dict(
        type='mmlocat.LaStViT',
        # the last level is the final-norm map LazyStrike scores (and the
        # strict loader expects the released final norm)
        final_norm=True,
        pooling='lazy_strike',
        topk=1,
        init_cfg=dict(checkpoint='checkpoints/last-b_in1k.pth')),
    neck=dict(
        type='mmlocat.PatchScoreNeck',
        scales=(4, 2, 1, 0.5),
        pooling='lazy_strike',
        topk=1))
