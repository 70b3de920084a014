# LaSt-CLIP: contrastive fine-tuning of a CLIP image tower whose global token
# is LazyStrike pooling (mmlocat.CLIPContrastive) with open_clip's own text
# tower, as open_clip fine-tunes a pretrained CLIP (open_clip_train of
# open_clip_torch 3.3), on CC3M. Shared by every configs/last/clip_* config;
# the leaves swap the image tower / text model / weights (and image size).
# configs/last/README.md lists open_clip's value beside ours for every
# setting ("LaSt-CLIP recipe").
#
# From the LaSt-ViT paper: LazyStrike with K = N/2 patches per channel for
# CLIP (topk_ratio=0.5; its CLIP B/16 ablation).
# open_clip's: the pretrained logit scale (read from the text tower's
# checkpoint; 100 for OpenAI's) clamped to [1, 100] after every step
# (LogitScaleClampHook), AdamW betas (0.9, 0.98), eps 1e-6, weight decay 0.2
# except gains, biases, 1-d parameters and the logit scale, linear warm-up
# then cosine to 0 per iteration, 64 images per GPU, mixed precision (fp16
# with loss scaling), RandomResizedCrop(0.9-1.0, bicubic) without flip,
# OpenAI's mean / std, ImageNet zero-shot with open_clip's class names and
# the 80 OpenAI templates.
# OURS (the paper states none; open_clip's defaults are from-scratch
# values): CC3M (webdataset shards, disjoint from COCO / LVIS) as data,
# lr 1e-5, 500 warm-up iterations, 11,550 iterations (the budget of 10 COCO
# Captions epochs at 512), lock_text=True (open_clip's --lock-text: the text
# tower stays the original CLIP's, so the class embeddings of the original
# CLIP still match the tuned image tower), features gathered over GPUs with
# gradients (open_clip's --gather-with-grad; its default gathers without:
# with AdamW both give the same update up to eps).
_base_ = [
    'mmpretrain::_base_/default_runtime.py', '../../_base_/mmlocat_runtime.py'
]

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
    # The text tower must be the CLIP the image tower was converted from
    # (compared with the init checkpoint's meta['clip'] at build).
    text_encoder=dict(
        model_name='ViT-B-16-quickgelu', weights='checkpoints/ViT-B-16.pt'),
    lock_text=True,
    init_logit_scale='pretrained',
    max_logit_scale=100.,
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
# The shard dataset decodes the images itself: no LoadImageFromFile
# ([load] + train_pipeline for file-based caption datasets).
train_pipeline = [train_crop, tokenizer, pack]
test_pipeline = [load, eval_resize, eval_crop, tokenizer, pack]

# CC3M as img2dataset writes it (webdataset shards of key.jpg + key.txt;
# configs/last/README.md says how), read by mmlocat.WebDatasetCaptionDataset
# (pip install webdataset).
train_dataloader = dict(
    batch_size=64,
    num_workers=8,
    persistent_workers=True,
    drop_last=True,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(
        type='mmlocat.WebDatasetCaptionDataset',
        data_root='data/cc3m',
        ann_file='{00000..00331}.tar',
        pipeline=train_pipeline))
# Retrieval on the 5-caption COCO val2017 set, all captions of an image at
# once (evaluation only: no COCO image is trained on).
val_dataloader = dict(
    batch_size=64,
    num_workers=8,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(
        type='mmlocat.CocoCaptionDataset',
        data_root='data/coco',
        ann_file='annotations/captions_val2017.json',
        data_prefix=dict(img_path='val2017/'),
        group_by_image=True,
        pipeline=test_pipeline))
val_evaluator = dict(type='mmlocat.RetrievalRecall', topk=(1, 5, 10))
# Zero-shot ImageNet top-1 / top-5 (tools/test.py), open_clip's protocol:
# its class names and the 80 OpenAI templates, embedded by the same text
# tower (tools/misc/dump_text_embeddings.py --imagenet, see the README).
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
    class_names='imagenet_open_clip',
    # the embeddings' recipe and CLIP, checked at build: the 80 OpenAI
    # templates, plain prompts, the text tower of the image init's CLIP
    templates='imagenet80',
    prompt_style='plain',
    clip_checkpoint='checkpoints/clip-vit-b16_mmlocat.pth',
    topk=(1, 5))

optim_wrapper = dict(
    type='AmpOptimWrapper',
    optimizer=dict(
        type='AdamW', lr=1e-5, betas=(0.9, 0.98), eps=1e-6, weight_decay=0.2),
    # mmengine's default, its per-parameter log lines summarised
    constructor='mmlocat.SummarisedOptimWrapperConstructor',
    paramwise_cfg=dict(
        norm_decay_mult=0.0,
        bias_decay_mult=0.0,
        flat_decay_mult=0.0,
        custom_keys={
            'logit_scale': dict(decay_mult=0.0),
            'cls_token': dict(decay_mult=0.0),
        }))
# open_clip's cosine_lr per iteration: lr * (i + 1) / warmup_iters for
# i < warmup_iters, then 0.5 * (1 + cos(pi * (i - warmup_iters) /
# (max_iters - warmup_iters))) * lr (mmengine's LinearLR reaches lr at
# end - 1).
warmup_iters = 500
max_iters = 11550
param_scheduler = [
    dict(
        type='LinearLR',
        start_factor=1.0 / warmup_iters,
        by_epoch=False,
        begin=0,
        end=warmup_iters),
    dict(
        type='CosineAnnealingLR',
        by_epoch=False,
        begin=warmup_iters,
        end=max_iters,
        eta_min=0.0),
]
train_cfg = dict(by_epoch=False, max_iters=max_iters, val_interval=1155)
val_cfg = dict()
test_cfg = dict()
default_hooks = dict(
    checkpoint=dict(
        type='CheckpointHook', by_epoch=False, interval=1155,
        max_keep_ckpts=2))
log_processor = dict(by_epoch=False)
# the towers' CLIP records: mmlocat.RecordHook, added by the runtime
custom_hooks = [dict(type='mmlocat.LogitScaleClampHook')]
# 8 GPUs x 64 (open_clip's per-GPU default).
auto_scale_lr = dict(base_batch_size=512, enable=False)
