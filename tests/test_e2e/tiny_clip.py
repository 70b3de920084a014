"""Tiny LaSt-CLIP config derived from the shipped B/16 recipe.

A 4-block, 32-d ``CLIPViT`` (16-d joint space, 32 px, 8-px patches,
LazyStrike K = N/2) and a random-init open_clip text tower from a tiny
open_clip model config (32-d, 2 blocks, CLIP's 77-token BPE so the shipped
tokenizer step is used unchanged), trained on
``mmlocat.testing.generate('captions', ...)``; and the shipped LaSt-CLIP
B/16 zero-shot segmentation config shrunk to that tower.
"""
import os.path as osp
import pprint
from typing import Optional, Sequence

SHIPPED = 'configs/last/clip_last-b16_8xb64_coco-caption.py'
EMBED = 16
TEXT_CFG = dict(
    embed_dim=EMBED,
    vision_cfg=dict(
        image_size=32, layers=1, width=32, patch_size=16, head_width=16),
    text_cfg=dict(
        context_length=77, vocab_size=49408, width=32, heads=2, layers=2))
TOWER = dict(
    embed_dims=32,
    num_layers=4,
    num_heads=2,
    feedforward_channels=64,
    output_dims=EMBED)


def write_tiny_clip_config(path: str,
                           repo_root: str,
                           paths: dict,
                           iters: int,
                           batch_size: int,
                           val_interval: int = 0,
                           checkpoint_interval: int = 0,
                           shuffle: bool = True,
                           local_loss: bool = False,
                           probe: bool = False,
                           pooling: str = 'lazy_strike',
                           lr: float = 2e-3,
                           extra: Optional[dict] = None) -> str:
    """Write the derived config to ``path``; ``paths`` is what
    ``generate('captions', ...)`` returned."""
    tokenizer = dict(type='mmlocat.TokenizeCaption', model_name='ViT-B-16')
    pack = dict(
        type='PackInputs',
        algorithm_keys=['text_tokens'],
        meta_keys=['img_path', 'img_id'])
    resize = dict(type='Resize', scale=(32, 32), backend='pillow')
    train_pipeline = [dict(type='LoadImageFromFile'), resize, tokenizer, pack]
    root = paths['data_root']
    overrides = dict(
        model=dict(
            image_encoder=dict(
                arch=dict(_delete_=True, **TOWER),
                img_size=32,
                patch_size=8,
                act='gelu',
                pooling=pooling,
                init_cfg=None),
            text_encoder=dict(_delete_=True, model_cfg=TEXT_CFG),
            lock_text=False,
            loss=dict(local_loss=local_loss)),
        train_dataloader=dict(
            batch_size=batch_size,
            num_workers=0,
            persistent_workers=False,
            sampler=dict(
                _delete_=True, type='InfiniteSampler', shuffle=shuffle),
            dataset=dict(
                data_root=root,
                ann_file=paths['train_ann_file'],
                data_prefix=dict(img_path=paths['train_prefix']),
                pipeline=train_pipeline)),
        val_dataloader=dict(
            batch_size=4,
            num_workers=0,
            persistent_workers=False,
            dataset=dict(
                data_root=root,
                ann_file=paths['val_ann_file'],
                data_prefix=dict(img_path=paths['val_prefix']),
                pipeline=train_pipeline)),
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
        optim_wrapper=dict(
            type='OptimWrapper', optimizer=dict(lr=lr, weight_decay=0.0)),
        param_scheduler=[],
        train_cfg=dict(
            _delete_=True,
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
        overrides['custom_hooks'] = [dict(type='TrainProbeHook')]
    overrides.update(extra or {})
    imports = ['mmlocat'] + (['train_probe'] if probe else [])
    return _write_derived(path, osp.join(repo_root, SHIPPED), overrides, [
        f'custom_imports = dict(imports={imports!r}, '
        'allow_failed_imports=False)'
    ])


def _write_derived(path: str,
                   base: str,
                   overrides: dict,
                   lines: Sequence[str] = ()) -> str:
    """``_base_ = base``, then ``lines``, then one line per override."""
    lines = [f'_base_ = {base!r}', *lines]
    for key, value in overrides.items():
        lines.append(f'{key} = {pprint.pformat(value, width=72)}')
    with open(path, 'w', encoding='utf-8') as f:
        f.write('\n'.join(lines) + '\n')
    return path


ZERO_SHOT = 'configs/last/zeroshot_last-clip-b16_voc20.py'


def write_tiny_zero_shot_config(path: str,
                                repo_root: str,
                                checkpoint: str,
                                embeddings: str,
                                data_root: str,
                                act: Optional[str] = None) -> str:
    """Write the shipped LaSt-CLIP B/16 VOC20 zero-shot config with the
    :data:`TOWER` image tower (32 px, 8-px patches) loading ``checkpoint``
    (the converter's file, through the shipped ``init_cfg``), 32-px slide
    windows and short side 40; ``act=None`` follows the checkpoint's
    recorded activation (the shipped config pins OpenAI's QuickGELU)."""
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
            # file: the embeddings are written from the class names
            class_name_file=None,
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
    return _write_derived(path, osp.join(repo_root, ZERO_SHOT), overrides)
