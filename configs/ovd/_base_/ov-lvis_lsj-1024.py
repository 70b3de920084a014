# OV-LVIS (base = frequent + common, novel = rare): train without rare
# annotations, evaluate mask AP_r / AP / APc / APf on LVIS v1 val. LSJ 1024,
# 48 epochs (steps at 32, 44), batch 64 (8 GPUs x 8), fp16.
dataset_type = 'LVISV1Dataset'
data_root = 'data/lvis_v1/'
image_size = (1024, 1024)
backend_args = None

train_pipeline = [
    dict(type='LoadImageFromFile', backend_args=backend_args),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
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
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
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
        # tools/dataset_converters/make_ov_lvis.py: rare annotations removed,
        # all 1203 categories kept (labels are LVIS v1's).
        ann_file='annotations/lvis_v1_train_norare.json',
        data_prefix=dict(img=''),
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
        ann_file='annotations/lvis_v1_val.json',
        data_prefix=dict(img=''),
        test_mode=True,
        pipeline=test_pipeline,
        backend_args=backend_args))
test_dataloader = val_dataloader
# Before the first iteration: training labels must index the classes the
# detector expects (FViT.train_class_names or the head's classes).
custom_hooks = [dict(type='mmlocat.OVLabelSpaceHook')]
# mmdet's LVISMetric with the numpy>=1.24 shim for the lvis package.
val_evaluator = dict(
    type='mmlocat.NumpyCompatLVISMetric',
    ann_file=data_root + 'annotations/lvis_v1_val.json',
    metric=['bbox', 'segm'],
    backend_args=backend_args)
test_evaluator = val_evaluator

train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=48, val_interval=4)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
param_scheduler = [
    dict(
        type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=250),
    dict(
        type='MultiStepLR',
        begin=0,
        end=48,
        by_epoch=True,
        milestones=[32, 44],
        gamma=0.1)
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
