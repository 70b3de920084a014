# Point-in-Box (PiB) on ImageNet-val LOC boxes
# (docs/method.md#point-in-box-pib), on the plain ViT-B/16 baseline: images
# with exactly one box covering < 25% of the image; Resize(256, short side) +
# CenterCrop(224), the box mapped through both and clipped; a hit if the argmax
# patch-score cell overlaps the box. Patch scores are the cosine of the
# final-norm patch tokens with the global token, read by
# mmlocat.PatchScoreClassifier. The baseline is mmlocat.LaStViT with
# pooling='cls' (mmpretrain's VisionTransformer, output for output: its CLS
# output is the global token); the pib_last-* leaves change that one option
# to pooling='lazy_strike'.
_base_ = [
    'mmpretrain::_base_/default_runtime.py', '../../_base_/mmlocat_runtime.py'
]

custom_imports = dict(imports=['mmlocat'], allow_failed_imports=False)
default_scope = 'mmpretrain'

model = dict(
    type='mmlocat.PatchScoreClassifier',
    backbone=dict(
        type='mmlocat.LaStViT',
        pooling='cls',
        arch='b',
        img_size=224,
        patch_size=16,
        out_type='cls_token'),
    neck=None,
    head=dict(
        type='VisionTransformerClsHead', num_classes=1000, in_channels=768))

# torchvision's ImageNet normalisation, as the public evaluation.
data_preprocessor = dict(
    num_classes=1000,
    mean=[123.675, 116.28, 103.53],
    std=[58.395, 57.12, 57.375],
    to_rgb=True)

# ImageNet-val as an mmpretrain folder; the LOC XML files live in
# `box_prefix` (the official layout: 'ILSVRC/Annotations/CLS-LOC/val').
dataset_type = 'mmlocat.ImageNetLocDataset'
data_root = 'data/imagenet'
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(
        type='mmlocat.ResizeEdgeWithBoxes',
        scale=256,
        edge='short',
        backend='pillow',
        interpolation='bilinear'),
    dict(type='CenterCrop', crop_size=224),
    dict(type='PackInputs', algorithm_keys=('gt_bboxes', )),
]
test_dataloader = dict(
    batch_size=64,
    num_workers=4,
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        data_prefix='val',
        ann_file='meta/val.txt',
        box_prefix='val_boxes',
        filter_single_small=True,
        max_area_ratio=0.25,
        pipeline=test_pipeline),
    sampler=dict(type='DefaultSampler', shuffle=False))
test_evaluator = [dict(type='mmlocat.PointInBox', patch_size=16)]
test_cfg = dict()
