"""Launcher helpers shared by ``tools/train.py`` and ``tools/test.py``."""
import os

import torch
import torch.distributed as dist
from mmengine.config import Config

__all__ = [
    'setup_cpu_distributed', 'enable_amp', 'load_config', 'add_rng_state_hook'
]

FORMAT_ENV = 'MMLOCAT_FORMAT_CONFIG'


def setup_cpu_distributed(cfg: Config, launcher: str) -> None:
    """Start a gloo process group when launched without CUDA.

    mmengine's ``init_dist`` always calls ``torch.cuda.set_device``, which
    fails on CPU-only machines. Initialising the group here first makes the
    Runner skip its own initialisation, and the model is wrapped by
    :class:`mmlocat.engine.CPUDistributedDataParallel` (no ``device_ids``,
    SyncBN reverted), so ``dist_train.sh`` also works on CPU (tests,
    laptops). Does nothing when CUDA is available.
    """
    if launcher != 'pytorch' or torch.cuda.is_available():
        return
    if dist.is_available() and not dist.is_initialized():
        dist.init_process_group(backend='gloo')
    env_cfg = cfg.setdefault('env_cfg', {})
    env_cfg.setdefault('dist_cfg', {})['backend'] = 'gloo'
    os.environ.setdefault('LOCAL_RANK', '0')
    wrapper = cfg.get('model_wrapper_cfg', None) or {}
    wrapper.setdefault('type', 'mmlocat.CPUDistributedDataParallel')
    wrapper.setdefault('broadcast_buffers', False)
    wrapper.setdefault('find_unused_parameters',
                       cfg.get('find_unused_parameters', False))
    cfg.model_wrapper_cfg = wrapper


def enable_amp(cfg: Config) -> None:
    """Switch the config's optimizer wrapper to mixed precision."""
    optim_wrapper = cfg.optim_wrapper.get('type', 'OptimWrapper')
    if optim_wrapper == 'AmpOptimWrapper':
        return
    if optim_wrapper != 'OptimWrapper':
        raise ValueError('--amp is only supported with OptimWrapper, '
                         f'but the config uses {optim_wrapper}')
    cfg.optim_wrapper.type = 'AmpOptimWrapper'
    cfg.optim_wrapper.setdefault('loss_scale', 'dynamic')


def load_config(path: str) -> Config:
    """``Config.fromfile`` for the tools, with yapf formatting optional.

    mmengine formats the config text with yapf every time it is logged or
    dumped (the Runner's start, ``work_dir/<config>.py``, every checkpoint's
    meta): about a second per call on a slow CPU. ``MMLOCAT_FORMAT_CONFIG=0``
    (the test suite sets it for tool subprocesses) keeps mmengine's
    unformatted text, which is the same valid, loadable Python config,
    only not line-wrapped. Unset or ``1``: formatted, as mmengine does.

    Raises:
        ValueError: If ``MMLOCAT_FORMAT_CONFIG`` is not '0' or '1'.
    """
    value = os.environ.get(FORMAT_ENV, '1')
    if value not in ('0', '1'):
        raise ValueError(f'{FORMAT_ENV} must be 0 or 1, got {value!r}')
    cfg = Config.fromfile(path)
    if value == '0':
        # fromfile ignores its format_python_code for non-lazy configs
        # (mmengine 0.10.7), so the flag is set on an equal Config here.
        cfg = Config(
            cfg.to_dict(),
            cfg_text=cfg.text,
            filename=cfg.filename,
            env_variables=cfg.env_variables,
            format_python_code=False)
    return cfg


def add_rng_state_hook(cfg: Config) -> None:
    """Add :class:`mmlocat.engine.RNGStateHook` unless the config has it.

    Checkpoints then carry the random-generator state and ``--resume``
    continues bit-identically.
    """
    hooks = list(cfg.get('custom_hooks', None) or [])
    if any(
            str(h.get('type', '')).split('.')[-1] == 'RNGStateHook'
            for h in hooks):
        return
    hooks.append(dict(type='mmlocat.RNGStateHook'))
    cfg.custom_hooks = hooks
