# Object discovery CorLoc with DINO ViT-S/16 + LaSt (LazyStrike) on VOC07
# trainval (spec/lastvit.md §2): foreground = s > mean(s) + std(s), box =
# tight box of the largest 8-connected component, a hit if IoU >= 0.5 with
# some ground-truth box. Images at full resolution, one per batch.
#   python tools/test.py configs/last/corloc_dino-s_voc07.py CHECKPOINT
# CHECKPOINT: DINO weights converted with tools/model_converters/
# dino2mmlocat.py (keys under `backbone.`).
# COCO-format boxes instead (COCO20k, or VOC converted by mmdet's
# tools/dataset_converters/pascal_voc.py): use
#   dataset=dict(type='mmlocat.CocoBoxesDataset', data_root=...,
#                ann_file='annotations/xxx.json',
#                data_prefix=dict(img_path='images/'), pipeline=...)
_base_ = ['mmpretrain::_base_/default_runtime.py']

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
        pos_embed_resample='dino',
        # No padding: the patch conv drops the right / bottom remainder, as
        # LOST crops images to a multiple of the patch size for DINO.
        patch_cfg=dict(padding=0)),
    neck=None,
    head=None)  # scores only

data_preprocessor = dict(
    mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375], to_rgb=True)

data_root = 'data/VOCdevkit/VOC2007'
test_pipeline = [
    dict(type='LoadImageFromFile'),
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
        filter_single_small=False,
        pipeline=test_pipeline),
    sampler=dict(type='DefaultSampler', shuffle=False))
test_evaluator = [
    dict(type='mmlocat.CorLoc', patch_size=16, iou_thr=0.5, connectivity=8)
]
test_cfg = dict()
