"""Helpers of the reliability runs (resume, preemption, DDP, leak, test
policy).

:func:`write_tiny_cls_config` derives a tiny LocAtViT classification config
from the shipped ``configs/locat/locat-t_8xb128_in1k.py`` (32-d, 2-block
LocAtViT, 32 px, 10 classes, plain OptimWrapper, iteration-based) that loads
:mod:`train_probe`; :func:`probe_env` puts this folder on ``PYTHONPATH`` and
sets the probe's variables; :func:`run_train` runs ``tools/train.py``;
:func:`paused_run` starts a run and waits until the probe pauses it;
:func:`read_losses` reads what the probe recorded.
"""
import contextlib
import os
import os.path as osp
import signal
import socket
import subprocess
import sys
import time
from typing import Iterator, Optional, Sequence

from helpers.harness import run_tool, start_tool
from helpers.shrink import write_derived

from mmlocat.testing import generate

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
    return write_derived(path, osp.join(repo_root, SHIPPED), overrides, [
        "custom_imports = dict(imports=['mmlocat', 'train_probe'], "
        'allow_failed_imports=False)'
    ])


def probe_env(base: dict, **probe) -> dict:
    """``base`` with this folder on ``PYTHONPATH`` and only the given
    ``PROBE_*`` variables (``losses=...`` -> ``PROBE_LOSSES``)."""
    env = {k: v for k, v in base.items() if not k.startswith('PROBE_')}
    env['PYTHONPATH'] = HERE + os.pathsep + env.get('PYTHONPATH', '')
    env.update({f'PROBE_{k.upper()}': str(v) for k, v in probe.items()})
    return env


def train_command(config: str,
                  work_dir: str,
                  *extra: str,
                  procs: int = 1,
                  env: Optional[dict] = None) -> list:
    """``tools/train.py``, or ``tools/dist_train.sh`` with ``procs`` gloo
    processes (then a free ``PORT`` is put into ``env``)."""
    if procs == 1:
        return [
            sys.executable, 'tools/train.py', config, '--work-dir', work_dir,
            *extra
        ]
    env['PORT'] = str(free_port())
    return [
        'bash', 'tools/dist_train.sh', config,
        str(procs), '--work-dir', work_dir, *extra
    ]


def run_train(config: str,
              work_dir: str,
              env: dict,
              cwd: str,
              *extra: str,
              timeout: int = 540,
              procs: int = 1) -> str:
    """Run a training to the end; return its console output."""
    env = dict(env)
    cmd = train_command(config, work_dir, *extra, procs=procs, env=env)
    return run_tool(
        *cmd[1:],
        cwd=cwd,
        env=env,
        timeout=timeout,
        isolate='the probe hook is configured by PROBE_* variables and the '
        'reference runs of resume / preemption / DDP tests are compared '
        'with runs that must be processes (signals, gloo ranks)').ok(5000)


def tiny_imagenet(root: str) -> str:
    """10 classes x 2 training images of 40 px (5 batches of 4)."""
    return generate(
        'imagenet', root, num_train=2, num_val=1, img_size=(40, 40),
        seed=0)['data_root']


def read_losses(path: str, by_rank: bool = False) -> dict:
    """What the probe recorded: iteration -> loss (the last record of each
    iteration), or ``(rank, iteration) -> loss``."""
    out = {}
    with open(path) as f:
        for line in f:
            rank, step, value = line.split()
            key = (int(rank), int(step)) if by_rank else int(step)
            out[key] = float.fromhex(value)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def paused_run(cmd: Sequence[str],
               env: dict,
               cwd: str,
               losses: str,
               ranks: int = 1,
               timeout: int = 300) -> Iterator[subprocess.Popen]:
    """Start ``cmd`` (a training run whose probe pauses, in a new process
    session) and yield it once every rank has paused; the process group
    is killed on the way out if it still runs. :func:`resume` lets it go
    on."""
    # [prefix...] python|bash SCRIPT ARGS (prefix: e.g. setpriv ...)
    at = next(i for i, word in enumerate(cmd)
              if word in (sys.executable, 'bash'))
    proc = start_tool(
        *cmd[at + 1:],
        prefix=cmd[:at],
        cwd=cwd,
        env=env,
        start_new_session=True,
        isolate='a paused run is signalled, killed or raced '
        'by a second run: only a process can be')
    try:
        deadline = time.time() + timeout
        while not all(osp.exists(f'{losses}.pid.{r}') for r in range(ranks)):
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.time() < deadline, 'the run never reached the pause'
            time.sleep(0.1)
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()


def resume(proc: subprocess.Popen, losses: str, timeout: int = 300) -> tuple:
    """Let a :func:`paused_run` go on; return its ``(stdout, stderr)``."""
    open(losses + '.go', 'w').close()
    return proc.communicate(timeout=timeout)


def paused_pid(losses: str, rank: int = 0) -> int:
    """The pid of the paused process of ``rank``."""
    with open(f'{losses}.pid.{rank}') as f:
        return int(f.read())
