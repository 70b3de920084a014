# F-ViT head on a frozen LocAtViT-B/16 (LocAt weights), OV-COCO. A LocAtViT
# has no CLIP text alignment, so there is no CLIP score fusion; everything
# else is fvit_clip-b16_ov-coco.py.
_base_ = './fvit_clip-b16_ov-coco.py'
model = dict(
    vlm_fusion=False,
    # No value path without a CLIP: the ordinary last block + final norm.
    last_tap='block',
    data_preprocessor=dict(
        mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375]),
    backbone=dict(
        _delete_=True,
        type='mmlocat.LocAtViT',
        arch='b',
        patch_size=16,
        img_size=224,
        out_type='featmap',
        out_indices=(3, 5, 7, 11),
        init_cfg=dict(
            type='Pretrained',
            checkpoint='checkpoints/locat-b16_mmlocat.pth',
            prefix='backbone.')),
    roi_head=dict(vlm_roi_extractor=None))
