# LocAtViT ImageNet-1k classification recipe
# (docs/method.md#imagenet-1k-classification-recipe):
# the timm DeiT-style recipe of the public code, shared by every LocAtViT
# config and by its plain-ViT twin (same recipe, gaug=False, prr=False).
_base_ = [
    'mmpretrain::_base_/datasets/imagenet_bs64_swin_224.py',
    'mmpretrain::_base_/schedules/imagenet_bs1024_adamw_swin.py',
    'mmpretrain::_base_/default_runtime.py',
    '../../_base_/mmlocat_runtime.py',
]
custom_imports = dict(imports=['mmlocat'], allow_failed_imports=False)
default_scope = 'mmpretrain'

# Mean/std 0.5 (the published LocAtViT checkpoints use them).
pixel_mean = [127.5, 127.5, 127.5]
pixel_std = [127.5, 127.5, 127.5]
data_preprocessor = dict(
    num_classes=1000, mean=pixel_mean, std=pixel_std, to_rgb=True)

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(
        type='RandomResizedCrop',
        scale=224,
        backend='pillow',
        interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    # rand-m9-mstd0.5-inc1
    dict(
        type='RandAugment',
        policies='timm_increasing',
        num_policies=2,
        total_level=10,
        magnitude_level=9,
        magnitude_std=0.5,
        hparams=dict(pad_val=[128, 128, 128], interpolation='bicubic')),
    # timm 'pixel' mode: N(0, 1) noise in normalised space.
    dict(
        type='RandomErasing',
        erase_prob=0.25,
        mode='rand',
        min_area_ratio=0.02,
        max_area_ratio=1 / 3,
        fill_color=pixel_mean,
        fill_std=pixel_std),
    dict(type='PackInputs'),
]
# timm's default crop_pct 0.9: resize to 248, centre crop 224.
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(
        type='ResizeEdge',
        scale=248,
        edge='short',
        backend='pillow',
        interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=224),
    dict(type='PackInputs'),
]
# 8 GPUs x 128 = the global batch of 1024.
train_dataloader = dict(batch_size=128, dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(batch_size=128, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader

model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='mmlocat.LocAtViT',
        arch='t',
        img_size=224,
        patch_size=16,
        drop_path_rate=0.1,
        gaug=True,
        prr=True,
        # timm's from-scratch initialisation, as the public code; None keeps
        # mmpretrain's (Xavier MLPs, zero CLS token).
        init_cfg=dict(type='mmlocat.TimmViTInit')),
    neck=None,
    head=dict(
        type='VisionTransformerClsHead',
        num_classes=1000,
        in_channels=192,
        loss=dict(
            type='LabelSmoothLoss', label_smooth_val=0.1, mode='original'),
        # timm's head: truncated normal 0.02 (mmpretrain's: zeros).
        init_cfg=dict(type='TruncNormal', layer='Linear', std=.02, bias=0.),
    ),
    init_cfg=[
        dict(type='TruncNormal', layer='Linear', std=.02),
        dict(type='Constant', layer='LayerNorm', val=1., bias=0.),
    ],
    train_cfg=dict(augments=[
        dict(type='Mixup', alpha=0.8),
        dict(type='CutMix', alpha=1.0)
    ]),
)

# AdamW, lr 1e-3 at batch 1024, wd 0.05 (not on norms, biases, cls/pos
# embeddings), grad-norm clip 5, fp16 AMP.
base_lr = 1e-3
optim_wrapper = dict(
    type='AmpOptimWrapper',
    loss_scale='dynamic',
    optimizer=dict(
        type='AdamW',
        lr=base_lr,
        weight_decay=0.05,
        eps=1e-8,
        betas=(0.9, 0.999)),
    # mmengine's default, its per-parameter log lines summarised
    constructor='mmlocat.SummarisedOptimWrapperConstructor',
    paramwise_cfg=dict(
        norm_decay_mult=0.0,
        bias_decay_mult=0.0,
        flat_decay_mult=0.0,
        custom_keys={
            '.cls_token': dict(decay_mult=0.0),
            '.pos_embed': dict(decay_mult=0.0)
        }),
    clip_grad=dict(max_norm=5.0),
)

# One cycle of the public code: linear warmup from 1e-7 for 20 epochs, then
# linear decay to 1e-7, stepped every iteration.
max_epochs = 300
warmup_epochs = 20
min_lr_ratio = 1e-7 / base_lr
param_scheduler = [
    dict(
        type='LinearLR',
        start_factor=min_lr_ratio,
        end_factor=1.0,
        by_epoch=True,
        begin=0,
        end=warmup_epochs,
        convert_to_iter_based=True),
    dict(
        type='LinearLR',
        start_factor=1.0,
        end_factor=min_lr_ratio,
        by_epoch=True,
        begin=warmup_epochs,
        end=max_epochs,
        convert_to_iter_based=True),
]
train_cfg = dict(by_epoch=True, max_epochs=max_epochs, val_interval=1)
auto_scale_lr = dict(base_batch_size=1024)
