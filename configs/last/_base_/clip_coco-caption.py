# LaSt-CLIP: contrastive fine-tuning of a CLIP image tower whose global token
# is LazyStrike pooling (mmlocat.CLIPContrastive), on COCO Captions, with
# open_clip's own text tower. Shared by every configs/last/clip_* config; the
# leaves only swap the image tower / text model / weights (and image size).
#
# From the LaSt-ViT paper: LazyStrike with K = N/2 patches per channel for
# CLIP (topk_ratio=0.5; its CLIP B/16 ablation). Everything else is
# open_clip's training default (open_clip_train/params.py): AdamW betas
# (0.9, 0.98), eps 1e-6, weight decay 0.2 except gains, biases, 1-d
# parameters and the logit scale, cosine schedule, batch 64 per GPU, logit
# scale init log(1/0.07) clamped to 100, features gathered over GPUs with
# gradients, mixed precision; RandomResizedCrop(0.9-1.0, bicubic), no flip.
# OURS (the paper gives none; open_clip's are from-scratch values): COCO
# Captions train2017 as data, lr 1e-5, 10 epochs, 500-iteration warm-up,
# and lock_text=True: the text tower stays the original CLIP's, so the OV
# configs' class text embeddings (dumped from the original CLIP) still match
# the fine-tuned image tower.
_base_ = ['mmpretrain::_base_/default_runtime.py']

custom_imports = dict(imports=['mmlocat'], allow_failed_imports=False)
default_scope = 'mmpretrain'

# OpenAI CLIP's mean / std (open_clip uses them for OpenAI and EVA02-CLIP).
clip_norm = dict(
    mean=[122.770938, 116.7460125, 104.09373615],
    std=[68.5005327, 66.6321579, 70.32316305])
model = dict(
    type='mmlocat.CLIPContrastive',
    data_preprocessor=dict(
        type='mmpretrain.ClsDataPreprocessor', to_rgb=True, **clip_norm),
    image_encoder=dict(
        type='mmlocat.CLIPViT',
        arch='b',
        img_size=224,
        patch_size=16,
        pooling='lazy_strike',
        topk=None,
        topk_ratio=0.5,
        out_type='cls_token',
        init_cfg=dict(
            type='Pretrained',
            checkpoint='checkpoints/clip-vit-b16_mmlocat.pth',
            prefix='backbone.')),
    # OpenAI's weights use QuickGELU: open_clip's *-quickgelu model names.
    text_encoder=dict(
        model_name='ViT-B-16-quickgelu', weights='checkpoints/ViT-B-16.pt'),
    lock_text=True,
    loss=dict(
        type='mmlocat.CLIPContrastiveLoss',
        local_loss=False,
        gather_with_grad=True))

img_size = 224
# input size of the metafile's FLOPs (tools/analysis_tools/get_flops.py)
image_size = (img_size, img_size)
# The four CLIPs (OpenAI B/16, L/14, EVA02-CLIP B/16, L/14-336) share CLIP's
# BPE tokenizer with 77 tokens.
tokenizer = dict(type='mmlocat.TokenizeCaption', model_name='ViT-B-16')
pack = dict(
    type='PackInputs',
    algorithm_keys=['text_tokens'],
    meta_keys=['img_path', 'img_id'])
train_crop = dict(
    type='RandomResizedCrop',
    scale=img_size,
    crop_ratio_range=(0.9, 1.0),
    interpolation='bicubic',
    backend='pillow')
eval_resize = dict(
    type='ResizeEdge',
    scale=img_size,
    edge='short',
    interpolation='bicubic',
    backend='pillow')
eval_crop = dict(type='CenterCrop', crop_size=img_size)
load = dict(type='LoadImageFromFile')
train_pipeline = [load, train_crop, tokenizer, pack]
test_pipeline = [load, eval_resize, eval_crop, tokenizer, pack]

data_root = 'data/coco'
train_dataloader = dict(
    batch_size=64,
    num_workers=8,
    persistent_workers=True,
    drop_last=True,
    sampler=dict(type='DefaultSampler', shuffle=True),
    dataset=dict(
        type='mmlocat.CocoCaptionDataset',
        data_root=data_root,
        ann_file='annotations/captions_train2017.json',
        data_prefix=dict(img_path='train2017/'),
        missing_images='error',
        pipeline=train_pipeline))
# Retrieval on the 5-caption val2017 set, all captions of an image at once.
val_dataloader = dict(
    batch_size=64,
    num_workers=8,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(
        type='mmlocat.CocoCaptionDataset',
        data_root=data_root,
        ann_file='annotations/captions_val2017.json',
        data_prefix=dict(img_path='val2017/'),
        group_by_image=True,
        pipeline=test_pipeline))
val_evaluator = dict(type='mmlocat.RetrievalRecall', topk=(1, 5, 10))
# Zero-shot ImageNet top-1 (tools/test.py) from class-name embeddings of the
# same text tower (tools/misc/dump_text_embeddings.py, see the README).
zero_shot_pipeline = [load, eval_resize, eval_crop, dict(type='PackInputs')]
test_dataloader = dict(
    batch_size=64,
    num_workers=8,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(
        type='ImageNet',
        data_root='data/imagenet',
        split='val',
        pipeline=zero_shot_pipeline))
test_evaluator = dict(
    type='mmlocat.ZeroShotAccuracy',
    embeddings='data/imagenet/embeddings/imagenet_clip-vit-b16.npy',
    topk=(1, 5))

optim_wrapper = dict(
    type='AmpOptimWrapper',
    optimizer=dict(
        type='AdamW', lr=1e-5, betas=(0.9, 0.98), eps=1e-6, weight_decay=0.2),
    paramwise_cfg=dict(
        norm_decay_mult=0.0,
        bias_decay_mult=0.0,
        flat_decay_mult=0.0,
        custom_keys={
            'logit_scale': dict(decay_mult=0.0),
            'cls_token': dict(decay_mult=0.0),
        }))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0, end=500),
    dict(
        type='CosineAnnealingLR', by_epoch=True, begin=0, end=10, eta_min=0.0),
]
train_cfg = dict(by_epoch=True, max_epochs=10, val_interval=1)
val_cfg = dict()
test_cfg = dict()
default_hooks = dict(
    checkpoint=dict(type='CheckpointHook', interval=1, max_keep_ckpts=2))
# 8 GPUs x 64 (open_clip's per-GPU default).
auto_scale_lr = dict(base_batch_size=512, enable=False)
