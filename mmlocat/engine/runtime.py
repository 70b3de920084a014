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
* a resumed run without ``randomness.seed`` takes the seed its checkpoint
  recorded before anything is built (:func:`resumed_seed`), so samplers and
  dataloader workers draw as in the interrupted run;
* the datasets are wrapped in :class:`mmlocat.CheckedDataset`
  (:func:`mmlocat.engine.data_guard.guard_runner_data`; options: the
  config's ``checked_dataset`` dict).

A hook, loop or checkpoint hook of another type that the config names is
kept as it is.
"""
import os.path as osp
from typing import List, Optional

from mmengine.config import Config

__all__ = ['RUNNER_TYPE', 'apply_runtime', 'resumed_seed', 'RUNTIME_HOOKS']

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


def apply_runtime(cfg: Config) -> List[str]:
    """Complete ``cfg`` with the runtime (in place).

    Returns:
        One line per change, for the log (nothing when the config already
        says everything).
    """
    applied = []
    hooks = list(cfg.get('custom_hooks', None) or [])
    named = {_short_type(h) for h in hooks}
    for name in RUNTIME_HOOKS:
        if name not in named:
            hooks.append(dict(type=f'mmlocat.{name}'))
            applied.append(f'custom_hooks += mmlocat.{name}')
    cfg.custom_hooks = hooks
    checkpoint = (cfg.get('default_hooks', None) or {}).get('checkpoint')
    if checkpoint is not None and checkpoint.get(
            'type', None) in _PLAIN_CHECKPOINT_HOOK:
        checkpoint['type'] = 'mmlocat.AtomicCheckpointHook'
        applied.append('default_hooks.checkpoint: CheckpointHook -> '
                       'mmlocat.AtomicCheckpointHook')
    train_cfg = cfg.get('train_cfg', None)
    if train_cfg:
        loop = train_cfg.get('type', None)
        if loop in _PLAIN_EPOCH_LOOP or (loop is None
                                         and train_cfg.get('by_epoch', False)):
            train_cfg.pop('by_epoch', None)
            train_cfg['type'] = 'mmlocat.ResumableEpochBasedTrainLoop'
            applied.append('train_cfg: EpochBasedTrainLoop -> '
                           'mmlocat.ResumableEpochBasedTrainLoop')
    seed = resumed_seed(cfg)
    if seed is not None:
        cfg.randomness = dict(cfg.get('randomness', None) or {}, seed=seed)
        applied.append(f'randomness.seed = {seed} (recorded by the '
                       'checkpoint this run resumes)')
    return applied


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
