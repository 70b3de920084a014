# OV-COCO (48 base / 17 novel): train on base annotations, evaluate all 65
# classes with mmdet's OVCocoMetric (box AP50 novel / base). LSJ 640, 3
# epochs, batch 64 (8 GPUs x 8), AdamW 1e-4, wd 0.1, clip 1.0, fp16.
dataset_type = 'CocoDataset'
data_root = 'data/coco/'
base_classes = ('person', 'bicycle', 'car', 'motorcycle', 'train', 'truck',
                'boat', 'bench', 'bird', 'horse', 'sheep', 'bear', 'zebra',
                'giraffe', 'backpack', 'handbag', 'suitcase', 'frisbee',
                'skis', 'kite', 'surfboard', 'bottle', 'fork', 'spoon', 'bowl',
                'banana', 'apple', 'sandwich', 'orange', 'broccoli', 'carrot',
                'pizza', 'donut', 'chair', 'bed', 'toilet', 'tv', 'laptop',
                'mouse', 'remote', 'microwave', 'oven', 'toaster',
                'refrigerator', 'book', 'clock', 'vase', 'toothbrush')
novel_classes = ('airplane', 'bus', 'cat', 'dog', 'cow', 'elephant',
                 'umbrella', 'tie', 'snowboard', 'skateboard', 'cup', 'knife',
                 'cake', 'couch', 'keyboard', 'sink', 'scissors')
# All 65 in COCO id order: the evaluation labels and the head's classes.
all_classes = ('person', 'bicycle', 'car', 'motorcycle', 'airplane', 'bus',
               'train', 'truck', 'boat', 'bench', 'bird', 'cat', 'dog',
               'horse', 'sheep', 'cow', 'elephant', 'bear', 'zebra', 'giraffe',
               'backpack', 'umbrella', 'handbag', 'tie', 'suitcase', 'frisbee',
               'skis', 'snowboard', 'kite', 'skateboard', 'surfboard',
               'bottle', 'cup', 'fork', 'knife', 'spoon', 'bowl', 'banana',
               'apple', 'sandwich', 'orange', 'broccoli', 'carrot', 'pizza',
               'donut', 'cake', 'chair', 'couch', 'bed', 'toilet', 'tv',
               'laptop', 'mouse', 'remote', 'keyboard', 'microwave', 'oven',
               'toaster', 'sink', 'refrigerator', 'book', 'clock', 'vase',
               'scissors', 'toothbrush')
image_size = (640, 640)
backend_args = None

train_pipeline = [
    dict(type='LoadImageFromFile', backend_args=backend_args),
    dict(type='LoadAnnotations', with_bbox=True),
    # Large-scale jitter.
    dict(
        type='RandomResize',
        scale=image_size,
        ratio_range=(0.1, 2.0),
        keep_ratio=True),
    dict(
        type='RandomCrop',
        crop_type='absolute_range',
        crop_size=image_size,
        recompute_bbox=True,
        allow_negative_crop=True),
    dict(type='FilterAnnotations', min_gt_bbox_wh=(1e-2, 1e-2)),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs')
]
test_pipeline = [
    dict(type='LoadImageFromFile', backend_args=backend_args),
    dict(type='Resize', scale=image_size, keep_ratio=True),
    dict(type='LoadAnnotations', with_bbox=True),
    dict(
        type='PackDetInputs',
        meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape',
                   'scale_factor'))
]
train_dataloader = dict(
    batch_size=8,
    num_workers=4,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=True),
    batch_sampler=dict(type='AspectRatioBatchSampler'),
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        # Base annotations only (tools/dataset_converters/make_ov_coco.py);
        # labels index base_classes and FViT maps them to all_classes.
        ann_file='annotations/instances_train2017_seen_2.json',
        data_prefix=dict(img='train2017/'),
        metainfo=dict(classes=base_classes),
        filter_cfg=dict(filter_empty_gt=True, min_size=32),
        pipeline=train_pipeline,
        backend_args=backend_args))
val_dataloader = dict(
    batch_size=1,
    num_workers=2,
    persistent_workers=True,
    drop_last=False,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        ann_file='annotations/instances_val2017_all_2.json',
        data_prefix=dict(img='val2017/'),
        metainfo=dict(
            classes=all_classes,
            base_classes=base_classes,
            novel_classes=novel_classes),
        test_mode=True,
        pipeline=test_pipeline,
        backend_args=backend_args))
test_dataloader = val_dataloader
# Before the first iteration: training labels must index the classes the
# detector expects (FViT.train_class_names or the head's classes).
custom_hooks = [dict(type='mmlocat.OVLabelSpaceHook')]
val_evaluator = dict(
    type='OVCocoMetric',
    ann_file=data_root + 'annotations/instances_val2017_all_2.json',
    metric='bbox',
    format_only=False,
    backend_args=backend_args)
test_evaluator = val_evaluator

train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=3, val_interval=1)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
# Linear warm-up, then a constant rate: F-ViT does not decay it within the
# 3 epochs (longer training overfits to the base classes).
param_scheduler = [
    dict(
        type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=250)
]
# F-ViT: weight decay on every parameter (the temperature too), a static
# fp16 loss scale of 512, the lr scaled linearly from batch 64.
optim_wrapper = dict(
    type='AmpOptimWrapper',
    loss_scale=512.0,
    optimizer=dict(
        type='AdamW', lr=1e-4, betas=(0.9, 0.999), weight_decay=0.1),
    clip_grad=dict(max_norm=1.0, norm_type=2))
auto_scale_lr = dict(enable=True, base_batch_size=64)
