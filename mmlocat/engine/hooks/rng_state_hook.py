"""Bit-identical ``--resume``: random-generator state in every checkpoint.

mmengine restores weights, optimizer, schedulers and the iteration on
resume, and an iteration-based loop replays its dataloader up to the resumed
iteration (so the sampler order and the workers' generators advance exactly
as before), but the main process's generators restart from the seed: the
resumed run draws other dropout / drop-path masks (and, with
``num_workers=0``, other augmentations) than the uninterrupted one. This
hook closes that gap.
"""
import logging
import random
from typing import Optional

import numpy as np
import torch
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.runner import EpochBasedTrainLoop

from mmlocat.registry import HOOKS

__all__ = ['RNGStateHook']

_KEY = 'rng_state'


def _capture() -> dict:
    """Every generator training consumes in this process, as plain data."""
    np_state = np.random.get_state()
    state = dict(
        python=random.getstate(),
        numpy=(np_state[0], torch.from_numpy(np_state[1].copy()),
               *np_state[2:]),
        torch=torch.get_rng_state(),
    )
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state['cuda'] = torch.cuda.get_rng_state_all()
        state['cuda_device'] = torch.cuda.current_device()
    return state


def _restore(state: dict) -> None:
    random.setstate(state['python'])
    kind, keys, *rest = state['numpy']
    np.random.set_state((kind, keys.numpy(), *rest))
    torch.set_rng_state(state['torch'])
    if state.get('cuda') is not None and torch.cuda.is_available():
        _restore_cuda(state)


def _restore_cuda(state: dict) -> None:
    """Every device's state; on another device count, the one in use.

    The device this process trains on gets the state of the device the
    saving process trained on (in DDP: rank 0's), so a rank other than 0
    continues from rank 0's stream instead of from the unused generator
    of its device index on rank 0. A resume on another node or with other
    ``CUDA_VISIBLE_DEVICES`` is no error: the other devices keep their
    state and a warning says so.
    """
    cuda = state['cuda']
    count = torch.cuda.device_count()
    current = torch.cuda.current_device()
    saved_device = state.get('cuda_device', current)
    if len(cuda) == count:
        torch.cuda.set_rng_state_all(cuda)
    restored = saved_device < len(cuda)
    if restored:
        torch.cuda.set_rng_state(cuda[saved_device], current)
    if len(cuda) != count:
        what = (f'restored device {current} from saved device '
                f'{saved_device} only'
                if restored else 'no CUDA generator state restored')
        print_log(
            f'RNGStateHook: the checkpoint holds the CUDA generator state '
            f'of {len(cuda)} device(s), this process sees {count}; {what}; '
            'the resumed run will not be bit-identical',
            logger='current',
            level=logging.WARNING)


def _loader_info(runner) -> dict:
    """What else decides the data stream: sampler, seed and workers."""
    loader = runner.train_dataloader
    sampler = getattr(loader, 'sampler', None)
    workers = getattr(loader, 'num_workers', 0) or 0
    seed = runner.seed
    return dict(
        # mmengine's worker_init_fn seeds worker i of rank r with this
        worker_seeds=None if seed is None else
        [workers * runner.rank + i + seed for i in range(workers)],
        sampler=type(sampler).__name__,
        sampler_seed=getattr(sampler, 'seed', None),
        sampler_epoch=getattr(sampler, 'epoch', None),
        num_workers=workers,
        batch_size=getattr(loader, 'batch_size', None),
        seed=seed,
        world_size=runner.world_size,
    )


def _diff_rank_seed(runner) -> bool:
    cfg = getattr(runner, 'cfg', None)
    randomness = cfg.get('randomness', {}) if cfg is not None else {}
    return bool((randomness or {}).get('diff_rank_seed', False))


class _RestoreBeforeBatch:
    """Iterator wrapper: call ``restore`` before batch number ``skip + 1``.
    """

    def __init__(self, iterator, skip: int, restore) -> None:
        self._iterator = iterator
        self._left = skip
        self._restore = restore

    def __iter__(self) -> '_RestoreBeforeBatch':
        return self

    def __next__(self):
        if self._left == 0 and self._restore is not None:
            self._restore()
            self._restore = None
        self._left -= 1
        return next(self._iterator)

    def __getattr__(self, name: str):
        return getattr(self._iterator, name)


@HOOKS.register_module()
class RNGStateHook(Hook):
    """Save and restore the random generators so that resume is exact.

    * ``before_save_checkpoint``: stores the python ``random``, numpy and
      torch CPU (and CUDA) generator states plus the data-stream settings
      (sampler type / seed / epoch, dataloader workers, batch size, seed,
      world size) under ``checkpoint['rng_state']``.
    * ``after_load_checkpoint`` (``--resume``): keeps them; they are put back
      right before the first resumed batch is loaded (iteration-based
      loops and :class:`~mmlocat.engine.ResumableEpochBasedTrainLoop`:
      after the loop's dataloader replay, which repositions the sampler
      and the workers' generators; mmengine's epoch-based loop, resumed
      from an epoch-end checkpoint: at the start of the epoch, before its
      dataloader is created). A changed data-stream
      setting is reported, since the workers then draw other numbers.
    * ``before_val`` / ``after_val``: validation gets the generators'
      state back afterwards, so evaluating (which creates a dataloader and
      may draw numbers) does not shift the training stream.

    mmlocat's runtime (``runner_type = 'mmlocat.MMLocatRunner'``) adds it;
    a config may also name it in ``custom_hooks``. Exactness also needs
    deterministic kernels (CPU; on CUDA ``randomness=dict(seed=...,
    deterministic=True)``).

    Distributed runs: only rank 0 writes the checkpoint, so on resume every
    rank gets rank 0's generator states (on CUDA: rank 0's device state on
    each rank's own device). This is exact when the ranks' generators are
    alike, i.e. with ``randomness.diff_rank_seed=False`` (mmengine's
    default), where every rank is seeded alike, as long as the ranks also
    draw alike (e.g. no per-sample number of draws in main-process
    augmentation with ``num_workers=0``). With ``diff_rank_seed=True`` the
    per-rank streams after resume equal rank 0's; the hook warns at resume
    in that case.
    """
    priority = 'VERY_HIGH'

    def __init__(self) -> None:
        self._pending: Optional[dict] = None
        self._val_state: Optional[dict] = None

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        checkpoint[_KEY] = dict(state=_capture(), data=_loader_info(runner))

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        if not getattr(runner, '_resume', False):
            return  # load_from: weights only, a fresh random stream
        saved = checkpoint.get(_KEY)
        if saved is None:
            print_log(
                'RNGStateHook: the checkpoint has no random-generator '
                'state (saved without this hook); the resumed run will not '
                'be bit-identical',
                logger='current',
                level=logging.WARNING)
            return
        now = _loader_info(runner)
        changed = {
            k: (v, now.get(k))
            for k, v in saved['data'].items()
            if k != 'sampler_epoch' and now.get(k) != v
        }
        if changed:
            print_log(
                'RNGStateHook: the data stream differs from the checkpoint '
                f'(saved, now): {changed}; the resumed run will not be '
                'bit-identical: resume with the settings the checkpoint '
                'saved (same batch size, workers, sampler and number of '
                'processes; randomness.seed as saved or unset, with '
                'mmlocat\'s runtime)',
                logger='current',
                level=logging.WARNING)
        if runner.world_size > 1 and _diff_rank_seed(runner):
            print_log(
                'RNGStateHook: randomness.diff_rank_seed=True, but the '
                'checkpoint (written by rank 0) holds rank 0\'s generator '
                'states only; after resume every rank continues rank 0\'s '
                'streams, so the resumed run will not be bit-identical',
                logger='current',
                level=logging.WARNING)
        self._pending = saved['state']

    def before_train_epoch(self, runner) -> None:
        if self._pending is None:
            return
        loop = runner.train_loop
        if hasattr(loop, 'dataloader_iterator'):
            # after the loop's replay of the batches trained before the
            # checkpoint (mmengine's IterBasedTrainLoop: ``runner.iter``;
            # ResumableEpochBasedTrainLoop: those of the current epoch),
            # before the first new batch is loaded (its augmentation draws
            # numbers)
            skip = getattr(loop, 'batches_to_skip', runner.iter)
            loop.dataloader_iterator = _RestoreBeforeBatch(
                loop.dataloader_iterator, skip, self._restore_pending)
        elif isinstance(loop, EpochBasedTrainLoop):
            # before this epoch's dataloader is created, as when saved
            self._restore_pending()

    def before_train_iter(self,
                          runner,
                          batch_idx: int,
                          data_batch=None) -> None:
        self._restore_pending()  # other loops: as early as a hook can

    def _restore_pending(self) -> None:
        if self._pending is not None:
            _restore(self._pending)
            self._pending = None

    def before_val(self, runner) -> None:
        self._val_state = _capture()

    def after_val(self, runner) -> None:
        if self._val_state is not None:
            _restore(self._val_state)
            self._val_state = None
