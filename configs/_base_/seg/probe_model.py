# The papers' frozen-backbone probe (docs/method.md#frozen-segmentation-probe):
# features of the last block before the final norm (stride 16), head = 1x1 conv
# to 512 + GroupNorm(1) + GELU + 1x1 classifier, whole-image test, ImageNet
# mean/std, on LocAtViT-B/16 (the LocAtViT-T probes are a small delta on it).
custom_imports = dict(imports=['mmlocat'], allow_failed_imports=False)
data_preprocessor = dict(
    type='SegDataPreProcessor',
    mean=[123.675, 116.28, 103.53],
    std=[58.395, 57.12, 57.375],
    bgr_to_rgb=True,
    pad_val=0,
    seg_pad_val=255)
model = dict(
    type='EncoderDecoder',
    data_preprocessor=data_preprocessor,
    backbone=dict(
        type='mmlocat.LocAtViT',
        arch='b',
        img_size=224,
        patch_size=16,
        out_type='featmap',
        out_indices=-1,
        final_norm=False,
        frozen_stages=12,
        init_cfg=dict(
            type='Pretrained',
            checkpoint='checkpoints/locat-b_in1k.pth',
            prefix='backbone.')),
    decode_head=dict(
        type='mmlocat.SegProbeHead',
        in_channels=768,
        channels=512,
        num_classes=150,
        align_corners=False,
        loss_decode=dict(
            type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0)),
    train_cfg=dict(),
    test_cfg=dict(mode='whole'))
