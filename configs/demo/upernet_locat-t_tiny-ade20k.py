# `make demo`: UperNet + LocAtViT-T trained from scratch on the generated
# tiny ADE20K-format set (tools/demo.py writes it to data/demo). Shrinks
# ../locat/upernet_locat-t_ade20k.py to CPU scale: 128 crops, narrow heads,
# 200 iterations, a from-scratch learning rate. Nothing else changes.
_base_ = '../locat/upernet_locat-t_ade20k.py'

data_root = 'data/demo/ade/ADEChallengeData2016'
crop_size = (128, 128)
iters = 200

model = dict(
    data_preprocessor=dict(size=crop_size),
    backbone=dict(img_size=128, init_cfg=None),
    decode_head=dict(channels=64),
    auxiliary_head=dict(channels=32))

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(
        type='RandomResize',
        scale=(160, 160),
        ratio_range=(0.75, 1.5),
        keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs')
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(160, 160), keep_ratio=True),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs')
]
train_dataloader = dict(
    batch_size=4,
    num_workers=2,
    persistent_workers=True,
    dataset=dict(data_root=data_root, pipeline=train_pipeline))
val_dataloader = dict(
    num_workers=1,
    persistent_workers=False,
    dataset=dict(data_root=data_root, pipeline=test_pipeline))
test_dataloader = val_dataloader

optim_wrapper = dict(optimizer=dict(lr=1e-3, weight_decay=0.01))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0, end=20),
    dict(
        type='PolyLR',
        eta_min=0.0,
        power=1.0,
        begin=20,
        end=iters,
        by_epoch=False)
]
train_cfg = dict(max_iters=iters, val_interval=iters)
default_hooks = dict(
    logger=dict(interval=25),
    checkpoint=dict(interval=iters, max_keep_ckpts=1))
randomness = dict(seed=0)
