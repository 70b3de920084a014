# UperNet + LocAtViT-B/16: mmseg's ViT-UperNet model
# (mmseg::_base_/models/upernet_vit-b16_ln_mln.py) with only the backbone
# swapped. Defines no data: the leaves add a dataset base and its classes.
_base_ = 'mmseg::_base_/models/upernet_vit-b16_ln_mln.py'

custom_imports = dict(imports=['mmlocat'], allow_failed_imports=False)
model = dict(
    # Weights come from the backbone's init_cfg, not mmseg's ViT-B path.
    pretrained=None,
    backbone=dict(
        _delete_=True,
        type='mmlocat.LocAtViT',
        arch='b',
        # the pre-training grid (224 / 16) fixes GAug's cap, eps and clamp;
        # at the crop size the variances are rescaled, pos-embeds resampled
        img_size=224,
        patch_size=16,
        out_type='featmap',
        out_indices=(2, 5, 8, 11),
        final_norm=False,
        init_cfg=dict(
            type='Pretrained',
            checkpoint='checkpoints/locat-b_in1k.pth',
            prefix='backbone.')))
