"""Launcher helpers shared by ``tools/train.py`` and ``tools/test.py``.

What a run gets from its config (hooks, loops, data checks) is
:mod:`mmlocat.engine.runtime`; these are what only a launcher can do.
"""
import glob
import os
import os.path as osp
from typing import Optional, Tuple

import torch
import torch.distributed as dist
from mmengine.config import Config

__all__ = [
    'setup_cpu_distributed', 'enable_amp', 'load_config', 'resolve_resume',
    'launcher_rank', 'EarlierRunError'
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


class EarlierRunError(FileExistsError):
    """A fresh run would write over the checkpoints of an earlier run."""


def _earlier_checkpoint(work_dir: str, latest: Optional[str]) -> Optional[str]:
    """The earlier run's checkpoint to name: what ``last_checkpoint``
    names, else the newest ``*.pth`` of the work dir (``None``: none)."""
    if latest is not None:
        return latest
    found = glob.glob(osp.join(glob.escape(work_dir), '*.pth'))
    return max(found, key=osp.getmtime) if found else None


def resolve_resume(work_dir: str,
                   resume: Optional[str],
                   overwrite: bool = False) -> Tuple[bool, Optional[str]]:
    """Check a ``--resume`` request before anything starts.

    A fresh run (no ``resume``) into a work dir that holds an earlier
    run's checkpoints (``last_checkpoint`` or a ``*.pth``) is refused:
    mmengine would replace ``iter_N.pth`` / ``epoch_N.pth`` and
    ``last_checkpoint`` one by one, leaving a mix of both runs. The user
    chooses: ``--resume`` continues that run, ``overwrite`` starts over.

    Args:
        work_dir: The run's work dir.
        resume: ``None`` (no ``--resume``), ``'auto'`` (the latest
            checkpoint of the work dir) or a checkpoint path.
        overwrite: Start a fresh run even over an earlier run's
            checkpoints (``tools/train.py --overwrite``).

    Returns:
        ``(resume, note)``: whether the Runner resumes, and a warning to
        show when it does not although asked to (no checkpoint in the work
        dir), or what ``overwrite`` allows.

    Raises:
        EarlierRunError: A fresh run over an earlier run's checkpoints
            without ``overwrite``; names the checkpoint and both options.
        FileNotFoundError: If ``resume`` is a local path that does not
            exist, or ``last_checkpoint`` names a missing file.
        IsADirectoryError: If ``resume`` is a folder.
    """
    pointer = osp.join(work_dir, 'last_checkpoint')
    latest = None
    if osp.isfile(pointer):
        with open(pointer) as f:
            latest = f.read().strip() or None
    if resume is None:
        earlier = _earlier_checkpoint(work_dir, latest)
        if earlier is None:
            return False, None
        if not overwrite:
            raise EarlierRunError(
                f'{work_dir} holds the checkpoints of an earlier run '
                f'({earlier}); a fresh run would overwrite them: pass '
                '--resume to continue that run, --overwrite to start from '
                'the beginning and overwrite them, or use another '
                '--work-dir')
        return False, (
            f'--overwrite: this run starts from the beginning in {work_dir}, '
            f'which holds the checkpoints of an earlier run ({earlier}): '
            'each checkpoint this run saves replaces the earlier one of the '
            'same name, and last_checkpoint will name this run\'s')
    if resume != 'auto':
        if '://' not in resume:  # remote stores: mmengine's backend reads
            if osp.isdir(resume):
                raise IsADirectoryError(f'--resume: {resume} is a '
                                        'directory, not a checkpoint file')
            if not osp.isfile(resume):
                raise FileNotFoundError(
                    f'--resume: checkpoint not found: {resume}')
        return True, None
    if latest is None:
        return False, (f'--resume: no checkpoint to resume from in '
                       f'{work_dir} (no last_checkpoint file): training '
                       'starts from the beginning')
    if '://' not in latest and not osp.isfile(latest):
        raise FileNotFoundError(
            f'--resume: {pointer} names {latest}, which does not exist '
            '(moved or deleted?); pass --resume PATH to choose a checkpoint')
    return True, None


def launcher_rank(launcher: str) -> int:
    """This process's global rank, from the launcher's environment.

    Known before any process group exists (so rank 0 alone can take the
    work-dir lock): torchrun's ``RANK``, slurm's ``SLURM_PROCID``, Open
    MPI's ``OMPI_COMM_WORLD_RANK`` (or ``PMI_RANK``); 0 without a launcher.
    """
    keys = dict(
        pytorch=('RANK', ),
        slurm=('SLURM_PROCID', ),
        mpi=('OMPI_COMM_WORLD_RANK', 'PMI_RANK')).get(launcher, ())
    for key in keys:
        if os.environ.get(key, '').isdigit():
            return int(os.environ[key])
    return 0
