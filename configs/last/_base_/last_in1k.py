# LaSt-ViT ImageNet-1k classification: the public recipe of
# ChengShiest/LAST-ViT (cls_pretrain/conf.py), shared by the LaSt-ViT config
# and its plain-ViT baseline. torchvision ViT-B/16 shapes, 100 epochs, AdamW
# lr 1e-3 wd 0.3 betas (0.9, 0.95) on every parameter, global batch 4096
# (8 GPUs x 512), 1% linear warm-up from 0.1 x lr, cosine to 1e-3 x lr,
# RandomResizedCrop + horizontal flip only, no label smoothing or mixup.
_base_ = [
    'mmpretrain::_base_/default_runtime.py', '../../_base_/mmlocat_runtime.py'
]

custom_imports = dict(imports=['mmlocat'], allow_failed_imports=False)
default_scope = 'mmpretrain'

# torchvision's ImageNet normalisation (the released weights use it).
data_preprocessor = dict(
    num_classes=1000,
    mean=[123.675, 116.28, 103.53],
    std=[58.395, 57.12, 57.375],
    to_rgb=True)

dataset_type = 'ImageNet'
data_root = 'data/imagenet'
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(
        type='RandomResizedCrop',
        scale=224,
        backend='pillow',
        interpolation='bilinear'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
# torchvision's Resize(256) + CenterCrop(224).
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(
        type='ResizeEdge',
        scale=256,
        edge='short',
        backend='pillow',
        interpolation='bilinear'),
    dict(type='CenterCrop', crop_size=224),
    dict(type='PackInputs'),
]
# 8 GPUs x 512 = the global batch of 4096.
train_dataloader = dict(
    batch_size=512,
    num_workers=8,
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        split='train',
        pipeline=train_pipeline),
    sampler=dict(type='DefaultSampler', shuffle=True))
val_dataloader = dict(
    batch_size=128,
    num_workers=8,
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        split='val',
        pipeline=test_pipeline),
    sampler=dict(type='DefaultSampler', shuffle=False))
val_evaluator = dict(type='Accuracy', topk=(1, 5))
test_dataloader = val_dataloader
test_evaluator = val_evaluator

model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='mmlocat.LaStViT',
        arch='b',
        img_size=224,
        patch_size=16,
        out_type='cls_token',
        pooling='lazy_strike',
        topk=1,
        # torchvision's vit_b_16 initialisation, as the public code; None
        # keeps mmpretrain's.
        init_cfg=dict(type='mmlocat.TorchvisionViTInit')),
    neck=None,
    head=dict(
        type='VisionTransformerClsHead',
        num_classes=1000,
        in_channels=768,
        loss=dict(type='CrossEntropyLoss', loss_weight=1.0),
        # torchvision's head starts at zero (also mmpretrain's default).
        init_cfg=dict(type='Constant', layer='Linear', val=0.)))

# The public code decays every parameter (detectron2's default parameter
# groups), so no paramwise_cfg.
base_lr = 1e-3
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(
        type='AdamW', lr=base_lr, weight_decay=0.3, betas=(0.9, 0.95)))

max_epochs = 100
param_scheduler = [
    # 1% of the run: linear warm-up from 0.1 x lr, stepped every iteration
    dict(
        type='LinearLR',
        start_factor=0.1,
        end_factor=1.0,
        by_epoch=True,
        begin=0,
        end=1,
        convert_to_iter_based=True),
    dict(
        type='CosineAnnealingLR',
        eta_min=base_lr * 1e-3,
        by_epoch=True,
        begin=1,
        end=max_epochs,
        convert_to_iter_based=True),
]
train_cfg = dict(by_epoch=True, max_epochs=max_epochs, val_interval=1)
val_cfg = dict()
test_cfg = dict()
auto_scale_lr = dict(base_batch_size=4096)
