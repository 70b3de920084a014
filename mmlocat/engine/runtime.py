"""mmlocat's training runtime: what a run declaring it gets.

A config declares the runtime with one line,
``runner_type = 'mmlocat.MMLocatRunner'`` (every shipped recipe inherits
``configs/_base_/mmlocat_runtime.py``, which says just that). The hosts'
own ``tools/train.py`` / ``tools/test.py`` (mmpretrain, mmseg, mmdet; so
``dist_train.sh``, ``slurm_train.sh`` and ``mim train`` too) build the
Runner a config's ``runner_type`` names, as mmlocat's tools do, so a run
is the same under any launcher. A runner type rather than a list of hooks
in a base config: a leaf config's own ``custom_hooks`` replaces an
inherited list (mmengine merges dicts, not lists), which would silently
drop the runtime's hooks; the runner adds what is missing to whatever the
config says, and logs each addition.

:func:`apply_runtime` is the one place that says what the runtime is:

* :class:`~mmlocat.engine.RNGStateHook` (random state in checkpoints),
  :class:`~mmlocat.engine.PreemptionHook` (SIGTERM / SIGUSR1 save a
  checkpoint, then exit; slurm requeue),
  :class:`~mmlocat.engine.WeightsOnlyCheckpointHook` (checkpoints torch's
  weights-only loading reads, and reads them in the run),
  :class:`~mmlocat.engine.RecordHook` (every record of
  :mod:`mmlocat.utils.records` in its checkpoints: the text files a model
  read, a LaSt-CLIP run's towers; re-checked on resume);
* ``default_hooks.checkpoint``: mmengine's ``CheckpointHook`` becomes
  :class:`~mmlocat.engine.AtomicCheckpointHook` (same arguments);
* ``train_cfg``: mmengine's epoch-based loop becomes
  :class:`~mmlocat.engine.ResumableEpochBasedTrainLoop` (same arguments);
* mixed precision (``AmpOptimWrapper``) on a machine without CUDA falls
  back to ``OptimWrapper`` (fp32; ``loss_scale`` / ``dtype`` dropped) with
  one warning, so every recipe runs a CPU trial (mmengine would stop with
  ``AmpOptimizerWrapper is only available training on gpu``);
* a short iteration-based run (a smoke trial) logs its first iterations
  (:func:`short_run_log_interval`; the hosts log every 50);
* a resumed run without ``randomness.seed`` takes the seed its checkpoint
  recorded before anything is built (:func:`resumed_seed`), so samplers and
  dataloader workers draw as in the interrupted run;
* the datasets are wrapped in :class:`mmlocat.CheckedDataset`
  (:func:`mmlocat.engine.data_guard.guard_runner_data`; options: the
  config's ``checked_dataset`` dict).

A hook, loop or checkpoint hook of another type that the config names is
kept as it is.
"""
import logging
import os
import os.path as osp
from typing import List, Optional, Tuple

from mmengine.config import Config

__all__ = [
    'setup_cpu_distributed', 'RUNNER_TYPE', 'apply_runtime', 'resumed_seed',
    'RUNTIME_HOOKS', 'short_run_log_interval'
]

#: The config line that declares the runtime.
RUNNER_TYPE = 'mmlocat.MMLocatRunner'

#: ``custom_hooks`` the runtime adds when the config does not name them.
RUNTIME_HOOKS = ('RNGStateHook', 'PreemptionHook', 'WeightsOnlyCheckpointHook',
                 'RecordHook')

# mmengine's own classes, which the mmlocat subclasses replace one to one
_PLAIN_CHECKPOINT_HOOK = ('CheckpointHook', 'mmengine.CheckpointHook')
_PLAIN_EPOCH_LOOP = ('EpochBasedTrainLoop', 'mmengine.EpochBasedTrainLoop')


def _short_type(hook: dict) -> str:
    return str(hook.get('type', '')).split('.')[-1]


def apply_runtime(cfg: Config) -> List[Tuple[int, str]]:
    """Complete ``cfg`` with the runtime (in place).

    Returns:
        ``(logging level, line)`` per change, for the log (nothing when the
        config already says everything).
    """
    applied = []
    hooks = list(cfg.get('custom_hooks', None) or [])
    named = {_short_type(h) for h in hooks}
    for name in RUNTIME_HOOKS:
        if name not in named:
            hooks.append(dict(type=f'mmlocat.{name}'))
            applied.append((logging.INFO, f'custom_hooks += mmlocat.{name}'))
    cfg.custom_hooks = hooks
    checkpoint = (cfg.get('default_hooks', None) or {}).get('checkpoint')
    if checkpoint is not None and checkpoint.get(
            'type', None) in _PLAIN_CHECKPOINT_HOOK:
        checkpoint['type'] = 'mmlocat.AtomicCheckpointHook'
        applied.append((logging.INFO, 'default_hooks.checkpoint: '
                        'CheckpointHook -> mmlocat.AtomicCheckpointHook'))
    train_cfg = cfg.get('train_cfg', None)
    if train_cfg:
        loop = train_cfg.get('type', None)
        if loop in _PLAIN_EPOCH_LOOP or (loop is None
                                         and train_cfg.get('by_epoch', False)):
            train_cfg.pop('by_epoch', None)
            train_cfg['type'] = 'mmlocat.ResumableEpochBasedTrainLoop'
            applied.append((logging.INFO, 'train_cfg: EpochBasedTrainLoop '
                            '-> mmlocat.ResumableEpochBasedTrainLoop'))
    if _amp_without_cuda(cfg):
        wrapper = cfg.optim_wrapper
        wrapper['type'] = 'OptimWrapper'
        for key in ('loss_scale', 'dtype', 'use_fsdp'):
            wrapper.pop(key, None)
        applied.append((logging.WARNING,
                        'optim_wrapper: AmpOptimWrapper -> OptimWrapper (no '
                        'CUDA here: mixed precision needs a GPU; this run '
                        'trains in fp32)'))
    line = short_run_log_interval(cfg)
    if line is not None:
        applied.append((logging.INFO, line))
    seed = resumed_seed(cfg)
    if seed is not None:
        cfg.randomness = dict(cfg.get('randomness', None) or {}, seed=seed)
        applied.append((logging.INFO, f'randomness.seed = {seed} (recorded '
                        'by the checkpoint this run resumes)'))
    return applied


def setup_cpu_distributed(cfg: Config) -> Optional[str]:
    """Start a gloo process group when launched without CUDA.

    mmengine's ``init_dist`` always calls ``torch.cuda.set_device``, which
    fails on CPU-only machines. Initialising the group here first makes the
    Runner skip its own initialisation, and the model is wrapped by
    :class:`mmlocat.engine.CPUDistributedDataParallel` (no ``device_ids``,
    SyncBN reverted), so ``dist_train.sh`` also works on CPU (tests,
    laptops). Does nothing when CUDA is available.

    Returns:
        The line for the log, or None when nothing was done.
    """
    import torch
    import torch.distributed as dist
    if cfg.get('launcher', 'none') != 'pytorch' or torch.cuda.is_available():
        return None
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
    return ('launcher pytorch without CUDA: a gloo process group, '
            'model_wrapper_cfg = mmlocat.CPUDistributedDataParallel')


def _amp_without_cuda(cfg: Config) -> bool:
    import torch
    wrapper = cfg.get('optim_wrapper', None) or {}
    return (str(wrapper.get('type', '')).split('.')[-1] == 'AmpOptimWrapper'
            and not torch.cuda.is_available())


def _resumed_checkpoint(cfg: Config) -> Optional[str]:
    """The local checkpoint a Runner built from ``cfg`` resumes, if any."""
    if not cfg.get('resume', False):
        return None
    path = cfg.get('load_from', None)
    if path is None and cfg.get('work_dir', None):
        pointer = osp.join(cfg.work_dir, 'last_checkpoint')
        if osp.isfile(pointer):
            with open(pointer) as f:
                path = f.read().strip() or None
    return path if path and osp.isfile(path) else None


def resumed_seed(cfg: Config) -> Optional[int]:
    """The seed to resume with: the one the checkpoint recorded, when the
    run resumes and the config fixes none (mmengine would take it only
    after the dataloaders were built with a fresh one)."""
    if (cfg.get('randomness', None) or {}).get('seed', None) is not None:
        return None
    checkpoint = _resumed_checkpoint(cfg)
    if checkpoint is None:
        return None
    from mmlocat.utils.records import read_checkpoint_meta
    seed = read_checkpoint_meta(checkpoint).get('seed')
    return seed if isinstance(seed, int) else None


#: A short run logs about this many times (at least every iteration).
SHORT_RUN_LOGS = 10


def short_run_log_interval(cfg: Config) -> Optional[str]:
    """Cap the logger's interval so that a short iteration-based run logs
    its first iterations (in place).

    The hosts log every 50 iterations: a 2- or 20-iteration smoke run of
    an iteration-based recipe prints no loss at all (an epoch-based one
    logs at each epoch's end anyway). The interval becomes
    ``min(interval, max(1, max_iters // SHORT_RUN_LOGS))``, which leaves
    every run of ``50 * SHORT_RUN_LOGS`` iterations or more as it is.

    Returns:
        The line for the log, or None when nothing changed (an epoch-based
        loop, no logger hook, an interval already small enough).
    """
    train_cfg = cfg.get('train_cfg', None) or {}
    max_iters = train_cfg.get('max_iters', None)
    logger = (cfg.get('default_hooks', None) or {}).get('logger', None)
    if not isinstance(max_iters, int) or max_iters < 1 or not logger:
        return None
    interval = logger.get('interval', 10)  # mmengine's LoggerHook default
    capped = max(1, max_iters // SHORT_RUN_LOGS)
    if interval <= capped:
        return None
    logger['interval'] = capped
    return (f'default_hooks.logger.interval = {capped} (was {interval}: '
            f'a {max_iters}-iteration run logs its first iterations)')
