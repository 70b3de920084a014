"""Helpers of the reliability runs (resume, DDP, leak, test policy).

:func:`write_tiny_cls_config` derives a tiny LocAtViT classification config
from the shipped ``configs/locat/locat-t_8xb128_in1k.py`` (32-d, 2-block
LocAtViT, 32 px, 10 classes, plain OptimWrapper, iteration-based) that loads
:mod:`train_probe`; :func:`probe_env` puts this folder on ``PYTHONPATH`` and
sets the probe's variables; :func:`run_train` runs ``tools/train.py``.
"""
import os
import os.path as osp
import pprint
import subprocess
import sys
from typing import Optional

HERE = osp.dirname(osp.abspath(__file__))

SHIPPED = 'configs/locat/locat-t_8xb128_in1k.py'


def write_tiny_cls_config(path: str,
                          repo_root: str,
                          data_root: str,
                          iters: int,
                          batch_size: int,
                          num_workers: int = 0,
                          random_train: bool = True,
                          checkpoint_interval: int = 0,
                          optimizer: Optional[dict] = None,
                          epochs: int = 0) -> str:
    """Write the derived config to ``path`` and return ``path``.

    Args:
        random_train: Keep random augmentation (crop, flip), dropout, drop
            path and Mixup/CutMix, so training consumes every generator;
            ``False`` makes the data and the network deterministic (resize
            only, no dropout, no batch mixing, ordered sampler) for
            cross-process comparisons.
        checkpoint_interval: Iterations between checkpoints (0: only at
            the end).
        optimizer: The optimizer config (default AdamW, lr 1e-3).
        epochs: Train ``epochs`` epochs with mmengine's epoch-based loop
            and ``DefaultSampler`` (``iters`` is then unused; checkpoints
            every ``checkpoint_interval`` epochs, default 1); 0: ``iters``
            iterations with ``InfiniteSampler``.
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
                _delete_=True,
                type='DefaultSampler' if epochs else 'InfiniteSampler',
                shuffle=random_train),
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
            optimizer=optimizer
            or dict(type='AdamW', lr=1e-3, weight_decay=0.05),
            clip_grad=dict(max_norm=5.0)),
        param_scheduler=[],
        train_cfg=dict(_delete_=True, by_epoch=True, max_epochs=epochs)
        if epochs else dict(_delete_=True, by_epoch=False, max_iters=iters),
        auto_scale_lr=dict(enable=False),
        default_hooks=dict(
            logger=dict(interval=1),
            checkpoint=dict(
                by_epoch=bool(epochs),
                interval=checkpoint_interval or (1 if epochs else iters),
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


def probe_env(base: dict, **probe) -> dict:
    """``base`` with this folder on ``PYTHONPATH`` and only the given
    ``PROBE_*`` variables (``losses=...`` -> ``PROBE_LOSSES``)."""
    env = {k: v for k, v in base.items() if not k.startswith('PROBE_')}
    env['PYTHONPATH'] = HERE + os.pathsep + env.get('PYTHONPATH', '')
    env.update({f'PROBE_{k.upper()}': str(v) for k, v in probe.items()})
    return env


def run_train(config: str,
              work_dir: str,
              env: dict,
              cwd: str,
              *extra: str,
              timeout: int = 540) -> str:
    """Run ``tools/train.py`` to the end; return its console output."""
    proc = subprocess.run([
        sys.executable, 'tools/train.py', config, '--work-dir', work_dir,
        *extra
    ],
                          capture_output=True,
                          text=True,
                          env=env,
                          cwd=cwd,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr
