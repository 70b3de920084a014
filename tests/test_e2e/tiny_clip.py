"""Tiny LaSt-CLIP config derived from the shipped B/16 recipe.

A tiny open_clip CLIP (random init, 32-d towers, 16-d joint space, CLIP's
77-token BPE so the shipped tokenizer step is used unchanged, OpenAI's
logit scale 100) stands for the user's pretrained CLIP: its image tower is
converted with ``clip2mmlocat.py`` (a 4-block ``CLIPViT`` at 32 px,
8-px patches, LazyStrike K = N/2) and its file is the text tower's
weights; the run trains on ``mmlocat.testing.generate('captions', ...,
shards=N)`` (webdataset shards, as the shipped CC3M recipe). Also the
shipped LaSt-CLIP / CLS B/16 zero-shot segmentation configs shrunk to that
tower.
"""
import json
import os.path as osp
from typing import Optional

from helpers.shrink import write_derived
from helpers.tiny_archs import tiny_open_clip_cfg

SHIPPED = 'configs/last/clip_last-b16_8xb64_cc3m.py'
EMBED = 16
TOWER = dict(
    embed_dims=32,
    num_layers=4,
    num_heads=2,
    feedforward_channels=64,
    output_dims=EMBED)
# The open_clip model whose visual tower is TOWER (exact GELU).
OPEN_CLIP_CFG = tiny_open_clip_cfg(
    embed_dim=EMBED, layers=4, mlp_ratio=2.0, patch_size=8)
OPEN_CLIP_NAME = 'tiny-lastclip'


def write_tiny_open_clip(folder: str, seed: int = 0) -> dict:
    """The user's pretrained CLIP: an open_clip model-config JSON
    (``--model-config``) and a state-dict file of a random-init model with
    OpenAI's logit scale, log(100)."""
    import math

    import open_clip
    import torch
    config = osp.join(folder, f'{OPEN_CLIP_NAME}.json')
    with open(config, 'w') as f:
        json.dump(OPEN_CLIP_CFG, f)
    torch.manual_seed(seed)
    model = open_clip.CLIP(**OPEN_CLIP_CFG)
    with torch.no_grad():
        model.logit_scale.fill_(math.log(100.))
    weights = osp.join(folder, f'{OPEN_CLIP_NAME}.pt')
    torch.save(model.state_dict(), weights)
    return dict(config=config, weights=weights)


def write_tiny_clip_config(path: str,
                           repo_root: str,
                           paths: dict,
                           clip: dict,
                           iters: int,
                           batch_size: int,
                           val_interval: int = 0,
                           checkpoint_interval: int = 0,
                           shuffle: bool = True,
                           local_loss: bool = False,
                           probe: bool = False,
                           pooling: str = 'lazy_strike',
                           lock_text: bool = False,
                           lr: float = 2e-3,
                           extra: Optional[dict] = None) -> str:
    """Write the derived config to ``path``; ``paths`` is what
    ``generate('captions', ..., shards=N)`` returned, ``clip`` the tiny
    CLIP's files (:func:`write_tiny_open_clip` plus ``converted``: its image
    tower converted by ``clip2mmlocat.py``)."""
    tokenizer = dict(type='mmlocat.TokenizeCaption', model_name='ViT-B-16')
    pack = dict(
        type='PackInputs',
        algorithm_keys=['text_tokens'],
        meta_keys=['img_path', 'img_id'])
    resize = dict(type='Resize', scale=(32, 32), backend='pillow')
    train_pipeline = [resize, tokenizer, pack]
    root = paths['data_root']
    overrides = dict(
        model=dict(
            image_encoder=dict(
                arch=dict(_delete_=True, **TOWER),
                img_size=32,
                patch_size=8,
                pooling=pooling,
                init_cfg=dict(checkpoint=clip['converted'])),
            text_encoder=dict(
                _delete_=True,
                model_cfg=OPEN_CLIP_CFG,
                weights=clip['weights']),
            lock_text=lock_text,
            loss=dict(local_loss=local_loss)),
        train_dataloader=dict(
            batch_size=batch_size,
            num_workers=0,
            persistent_workers=False,
            sampler=dict(
                _delete_=True, type='InfiniteSampler', shuffle=shuffle),
            dataset=dict(
                data_root=root,
                ann_file=paths['train_shards'],
                split_lines=True,  # a caption a line, as the COCO file
                pipeline=train_pipeline)),
        val_dataloader=dict(
            batch_size=4,
            num_workers=0,
            persistent_workers=False,
            dataset=dict(
                data_root=root,
                ann_file=paths['val_ann_file'],
                data_prefix=dict(img_path=paths['val_prefix']),
                pipeline=[dict(type='LoadImageFromFile')] + train_pipeline)),
        test_dataloader=dict(
            batch_size=8,
            num_workers=0,
            persistent_workers=False,
            dataset=dict(
                _delete_=True,
                type='CustomDataset',
                data_root=paths['zeroshot_root'],
                ann_file=paths['zeroshot_ann_file'],
                data_prefix='val',
                classes=osp.join(paths['zeroshot_root'],
                                 paths['zeroshot_classes']),
                pipeline=[
                    dict(type='LoadImageFromFile'), resize,
                    dict(type='PackInputs')
                ])),
        # the generated classes, not ImageNet's
        test_evaluator=dict(class_names=None),
        optim_wrapper=dict(
            type='OptimWrapper', optimizer=dict(lr=lr, weight_decay=0.0)),
        param_scheduler=[],
        train_cfg=dict(
            by_epoch=False,
            max_iters=iters,
            val_interval=val_interval or iters),
        default_hooks=dict(
            logger=dict(interval=1),
            checkpoint=dict(
                by_epoch=False,
                interval=checkpoint_interval or iters,
                max_keep_ckpts=-1)),
        randomness=dict(seed=0),
    )
    if probe:
        overrides['custom_hooks'] = [
            dict(type='mmlocat.LogitScaleClampHook'),
            dict(type='TrainProbeHook')
        ]
    overrides.update(extra or {})
    imports = ['mmlocat'] + (['train_probe'] if probe else [])
    return write_derived(path, osp.join(repo_root, SHIPPED), overrides, [
        f'custom_imports = dict(imports={imports!r}, '
        'allow_failed_imports=False)'
    ])


ZERO_SHOT = 'configs/last/zeroshot_{}-clip-b16_voc20.py'


def write_tiny_zero_shot_config(path: str,
                                repo_root: str,
                                checkpoint: str,
                                embeddings: str,
                                data_root: str,
                                act: Optional[str] = None,
                                pooling: str = 'last') -> str:
    """Write the shipped LaSt-CLIP (``pooling='last'``) or CLS-twin
    (``'cls'``) B/16 VOC20 zero-shot config with the :data:`TOWER` image
    tower (32 px, 8-px patches) loading ``checkpoint`` (the converter's
    file, through the shipped ``init_cfg``), 32-px slide windows and short
    side 40; ``act=None`` follows the checkpoint's recorded activation (the
    shipped config pins OpenAI's QuickGELU)."""
    overrides = dict(
        model=dict(
            backbone=dict(
                arch=dict(_delete_=True, **TOWER),
                img_size=32,
                patch_size=8,
                act=act,
                init_cfg=dict(checkpoint=checkpoint)),
            text_embeddings=embeddings,
            # one name per class (the dataset's), not SCLIP's class-name
            # file, and any prompt set: the tests embed the class names
            # with few templates, for speed
            class_name_file=None,
            templates=None,
            prompt_style=None,
            test_cfg=dict(crop_size=(32, 32), stride=(16, 16))),
        test_dataloader=dict(
            num_workers=0,
            persistent_workers=False,
            dataset=dict(
                data_root=data_root,
                pipeline=[
                    dict(type='LoadImageFromFile'),
                    dict(type='Resize', scale=(2048, 40), keep_ratio=True),
                    dict(type='LoadAnnotations'),
                    dict(type='PackSegInputs')
                ])))
    return write_derived(path, osp.join(repo_root, ZERO_SHOT.format(pooling)),
                         overrides)
