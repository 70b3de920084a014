# UperNet + LaSt-ViT-B/16 on COCO-Stuff-164k: mmseg's ViT-UperNet recipe with
# only the backbone (mmlocat.LaStViT, LaSt weights) and the neck swapped.
# mmlocat.PatchScoreNeck replaces mmseg's MultiLevelNeck: the same strides
# 4/8/16/32 from blocks 3/6/9/12, plus the LazyStrike patch-score map that
# modulates every level by (1 + gamma * score), gamma starting at 0.
_base_ = '../_base_/seg/upernet_vit_coco-stuff164k-512x512_80k.py'

model = dict(
    backbone=dict(
        _delete_=True,
        type='mmlocat.LaStViT',
        arch='b',
        # the pre-training grid (224 / 16); pos-embeds are resampled to the
        # crop on the fly
        img_size=224,
        patch_size=16,
        out_type='featmap',
        out_indices=(2, 5, 8, 11),
        # the last level is the final-norm map LazyStrike scores (and the
        # strict loader expects the released final norm)
        final_norm=True,
        pooling='lazy_strike',
        topk=1,
        init_cfg=dict(
            type='Pretrained',
            checkpoint='checkpoints/last-b_in1k.pth',
            prefix='backbone.')),
    neck=dict(
        _delete_=True,
        type='mmlocat.PatchScoreNeck',
        in_channels=[768, 768, 768, 768],
        out_channels=768,
        scales=(4, 2, 1, 0.5),
        global_pool='lazy_strike',
        topk=1))
