# COCO-Object for zero-shot segmentation: COCO val2017 (5,000 images),
# background + the 80 thing classes, maps written from the instance
# annotations by tools/dataset_converters/coco_object.py (0 = background,
# 255 = crowd). Images resized to short side 336 (ours). The leaves set
# the segmentor's bg_thresh: background is a class here.
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(2048, 336), keep_ratio=True),
    dict(type='LoadAnnotations'),
    dict(type='PackSegInputs')
]
test_dataloader = dict(
    batch_size=1,
    num_workers=4,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(
        type='mmlocat.COCOObjectDataset',
        data_root='data/coco',
        data_prefix=dict(
            img_path='val2017', seg_map_path='coco_object/val2017'),
        pipeline=test_pipeline))
test_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])
