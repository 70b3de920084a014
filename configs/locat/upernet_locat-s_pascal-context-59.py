# UperNet + LocAtViT-S on pascal-context-59: mmseg's ViT-UperNet recipe, only
# the backbone (and the channel widths it implies) swapped.
_base_ = '../_base_/seg/upernet_vit_pascal-context-59-480x480_80k.py'

model = dict(
    backbone=dict(
        _delete_=True,
        type='mmlocat.LocAtViT',
        arch='deit-small',
        # the pre-training grid (224 / 16) fixes GAug's cap, eps and clamp;
        # at the 480 crop the variances are rescaled, pos-embeds resampled
        img_size=224,
        patch_size=16,
        out_type='featmap',
        out_indices=(2, 5, 8, 11),
        final_norm=False,
        init_cfg=dict(
            type='Pretrained',
            checkpoint='checkpoints/locat-s_in1k.pth',
            prefix='backbone.')),
    neck=dict(in_channels=[384, 384, 384, 384], out_channels=384),
    decode_head=dict(in_channels=[384, 384, 384, 384]),
    auxiliary_head=dict(in_channels=384))
