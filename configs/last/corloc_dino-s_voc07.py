# Object discovery CorLoc with DINO ViT-S/16 + LazyStrike, training-free
# (LazyStrike pooling on DINO's own weights; the paper's DINO + LaSt is a DINO
# trained with LazyStrike: corloc_last-dino0080-s_*.py), VOC07 trainval
# (docs/method.md#corloc-and-coarse-segmentation), evaluated as LOST's code
# (github valeoai/LOST): foreground = s > mean(s) + std(s), box = the
# 4-connected foreground component holding the highest-scoring patch, cell box
# x 16, IoU without +1, a hit if IoU >= 0.5 with any ground-truth box;
# full-resolution images zero-padded bottom / right to a multiple of 16 after
# normalisation, decoded with PIL without EXIF rotation, one a batch.
#   python tools/test.py configs/last/corloc_dino-s_voc07.py CHECKPOINT
# CHECKPOINT: DINO weights converted with tools/model_converters/
# dino2mmlocat.py (keys under `backbone.`).
# COCO-format boxes instead (COCO20k, or VOC converted by mmdet's
# tools/dataset_converters/pascal_voc.py): use
#   dataset=dict(type='mmlocat.CocoBoxesDataset', data_root=...,
#                ann_file='annotations/xxx.json',
#                data_prefix=dict(img_path='images/'), pipeline=...)
_base_ = [
    'mmpretrain::_base_/default_runtime.py', '../_base_/mmlocat_runtime.py'
]

custom_imports = dict(imports=['mmlocat'], allow_failed_imports=False)
default_scope = 'mmpretrain'

model = dict(
    type='mmlocat.PatchScoreClassifier',
    backbone=dict(
        type='mmlocat.LaStViT',
        arch='deit-small',  # 384-d, 12 layers, 6 heads: DINO ViT-S/16
        img_size=224,
        patch_size=16,
        norm_cfg=dict(type='LN', eps=1e-6),
        out_type='cls_token',
        pooling='lazy_strike',
        topk=1,
        # DINO's own position-embedding interpolation at full resolution.
        pos_embed_cfg=dict(resample='dino'),
        # Zero padding of the normalised input to a multiple of 16 at the
        # right / bottom: LOST's padding (a 375x500 image: a 24x32 grid).
        # padding=0 crops instead (DINO's visualize_attention.py).
        patch_cfg=dict(padding='corner')),
    neck=None,
    head=None)  # scores only

data_preprocessor = dict(
    mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375], to_rgb=True)

data_root = 'data/VOCdevkit/VOC2007'
# PIL decoding without EXIF rotation, as LOST's torchvision datasets; the
# decoded size must be the annotation's.
load_image = dict(
    type='LoadImageFromFile',
    color_type='color_ignore_orientation',
    imdecode_backend='pillow')
test_pipeline = [
    load_image,
    dict(type='mmlocat.CheckAnnotatedSize'),
    dict(type='PackInputs', algorithm_keys=('gt_bboxes', )),
]
test_dataloader = dict(
    batch_size=1,  # full-resolution images of different sizes
    num_workers=4,
    dataset=dict(
        type='mmlocat.ImageNetLocDataset',
        data_root=data_root,
        data_prefix='JPEGImages',
        ann_file='ImageSets/Main/trainval.txt',
        with_label=False,
        img_suffix='.jpg',
        box_prefix='Annotations',
        filter_single_small=False,  # every object counts, difficult too
        expected_num_images=5011,  # LOST's VOC07 trainval
        pipeline=test_pipeline),
    sampler=dict(type='DefaultSampler', shuffle=False))
test_evaluator = [
    dict(
        type='mmlocat.CorLoc',
        patch_size=16,
        iou_thr=0.5,
        component='seed',
        connectivity=4)
]
test_cfg = dict()
