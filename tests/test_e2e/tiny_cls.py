"""A derived tiny LocAtViT classification config for reliability runs.

Inherits the shipped ``configs/locat/locat-t_8xb128_in1k.py`` and shrinks it
(32-d, 2-block LocAtViT, 32 px, 10 classes, plain OptimWrapper), trains by
iterations and loads :mod:`train_probe` (this folder must be on
``PYTHONPATH``).
"""
import os.path as osp
import pprint

SHIPPED = 'configs/locat/locat-t_8xb128_in1k.py'


def write_tiny_cls_config(path: str,
                          repo_root: str,
                          data_root: str,
                          iters: int,
                          batch_size: int,
                          num_workers: int = 0,
                          random_train: bool = True,
                          checkpoint_interval: int = 0) -> str:
    """Write the derived config to ``path`` and return ``path``.

    Args:
        random_train: Keep random augmentation (crop, flip), dropout, drop
            path and Mixup/CutMix, so training consumes every generator;
            ``False`` makes the data and the network deterministic (resize
            only, no dropout, no batch mixing, ordered sampler) for
            cross-process comparisons.
        checkpoint_interval: Iterations between checkpoints (0: only at
            the end).
    """
    if random_train:
        pipeline = [
            dict(type='LoadImageFromFile'),
            dict(type='RandomResizedCrop', scale=32, backend='pillow'),
            dict(type='RandomFlip', prob=0.5),
            dict(type='PackInputs'),
        ]
    else:
        pipeline = [
            dict(type='LoadImageFromFile'),
            dict(type='Resize', scale=(32, 32), backend='pillow'),
            dict(type='PackInputs'),
        ]
    drop = 0.1 if random_train else 0.
    model = dict(
        backbone=dict(
            arch=dict(
                _delete_=True,
                embed_dims=32,
                num_layers=2,
                num_heads=2,
                feedforward_channels=64),
            img_size=32,
            patch_size=8,
            drop_rate=drop,
            drop_path_rate=drop),
        head=dict(num_classes=10, in_channels=32))
    if not random_train:
        model['train_cfg'] = dict(_delete_=True)
    overrides = dict(
        model=model,
        data_preprocessor=dict(num_classes=10),
        train_dataloader=dict(
            batch_size=batch_size,
            num_workers=num_workers,
            persistent_workers=num_workers > 0,
            sampler=dict(
                _delete_=True, type='InfiniteSampler', shuffle=random_train),
            dataset=dict(data_root=data_root, pipeline=pipeline)),
        val_dataloader=None,
        val_evaluator=None,
        val_cfg=None,
        test_dataloader=None,
        test_evaluator=None,
        test_cfg=None,
        optim_wrapper=dict(
            _delete_=True,
            type='OptimWrapper',
            optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.05),
            clip_grad=dict(max_norm=5.0)),
        param_scheduler=[],
        train_cfg=dict(_delete_=True, by_epoch=False, max_iters=iters),
        auto_scale_lr=dict(enable=False),
        default_hooks=dict(
            logger=dict(interval=1),
            checkpoint=dict(
                by_epoch=False,
                interval=checkpoint_interval or iters,
                max_keep_ckpts=-1)),
        custom_hooks=[dict(type='TrainProbeHook')],
        randomness=dict(seed=0),
    )
    lines = [
        f'_base_ = {osp.join(repo_root, SHIPPED)!r}',
        "custom_imports = dict(imports=['mmlocat', 'train_probe'], "
        'allow_failed_imports=False)'
    ]
    for key, value in overrides.items():
        lines.append(f'{key} = {pprint.pformat(value, width=72)}')
    with open(path, 'w', encoding='utf-8') as f:
        f.write('\n'.join(lines) + '\n')
    return path
