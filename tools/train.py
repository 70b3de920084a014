"""Train a model with any OpenMMLab host (mmpretrain, mmseg, mmdet).

A thin mmengine Runner wrapper in the hosts' shape: the config's
``default_scope`` chooses the host, its ``runner_type`` the Runner (mmlocat's
runtime is ``runner_type = 'mmlocat.MMLocatRunner'``, which every shipped
recipe inherits; README "The runtime"). The tool adds no hook, loop or
wrapper. What it does besides building the Runner, each printed when it
applies: ``--amp`` and ``--on-data-error`` change the config; the work dir
is locked (rank 0) and a fresh start over an earlier run's checkpoints is
refused (``--resume`` / ``--overwrite``); ``--check-data`` reads every file
first.
"""
import argparse
import contextlib
import os
import os.path as osp
import signal
import sys

import torch.distributed as dist
from mmengine.registry import RUNNERS
from mmengine.runner import Runner

import mmlocat  # noqa: F401  (registry node)
from mmlocat.datasets.dataset_check import check_before_run
from mmlocat.engine.data_guard import CONFIG_KEY as CHECKED_DATASET_KEY
from mmlocat.engine.runtime import RUNNER_TYPE
from mmlocat.utils.checkpoint_io import CheckpointWriteError
from mmlocat.utils.launch import (add_cfg_options, add_data_root_option,
                                  apply_data_root, check_component_arguments,
                                  enable_amp, launcher_rank, load_config,
                                  merge_cfg_options, resolve_resume)
from mmlocat.utils.work_dir_lock import WorkDirBusyError, WorkDirLock


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Train a model')
    parser.add_argument('config', help='train config file path')
    parser.add_argument('--work-dir', help='the dir to save logs and models')
    start = parser.add_mutually_exclusive_group()
    start.add_argument(
        '--resume',
        nargs='?',
        type=str,
        const='auto',
        help='resume from the given checkpoint, or from the latest '
        'checkpoint in the work dir when no path is given')
    start.add_argument(
        '--overwrite',
        action='store_true',
        help='start from the beginning even when the work dir holds the '
        'checkpoints of an earlier run (refused without it); checkpoints '
        'of the same name are replaced')
    parser.add_argument(
        '--amp', action='store_true', help='enable mixed precision training')
    parser.add_argument(
        '--check-data',
        action='store_true',
        help='read every training and validation file first (as '
        'tools/misc/check_dataset.py) and exit 1 on any fault; also '
        '`check_data = True` in the config')
    parser.add_argument(
        '--on-data-error',
        choices=['raise', 'skip'],
        help='a training file that cannot be loaded: stop naming it '
        '(raise, the default) or skip the sample, counted and logged; '
        'default: the config\'s checked_dataset.on_error')
    add_cfg_options(parser)
    add_data_root_option(parser)
    parser.add_argument(
        '--launcher',
        choices=['none', 'pytorch', 'slurm', 'mpi'],
        default='none',
        help='job launcher')
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    args = parser.parse_args()
    if 'LOCAL_RANK' not in os.environ:
        os.environ['LOCAL_RANK'] = str(args.local_rank)
    return args


def _error(message: str, status: int = 2) -> None:
    """One line and exit 2, as argparse reports a bad argument."""
    print(f'train.py: error: {message}', file=sys.stderr)
    sys.exit(status)


@contextlib.contextmanager
def _exit_on_signals():
    """SIGTERM / SIGUSR1 end the process through ``SystemExit`` (so the
    work-dir lock is released) until mmlocat.PreemptionHook, built with
    the Runner, takes them over to save a checkpoint first.

    Once the process leaves through ``SystemExit`` (a preemption stop, an
    error exit) these signals are ignored for the rest of its life: the
    launcher signals the other ranks as soon as one exits (torchrun
    SIGTERMs them; slurm signals every task), and a repeat must not cut
    their unwinding short (they would die of the signal, not exit with
    the preemption status). SIGKILL still ends a hung exit."""

    def leave(signum, frame):
        raise SystemExit(128 + signum)

    previous = {
        s: signal.signal(s, leave)
        for s in (signal.SIGTERM, signal.SIGUSR1)
    }
    leaving = False
    try:
        yield
    except SystemExit:
        leaving = True
        raise
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_IGN if leaving else handler)


def _resume(cfg, resume_arg, overwrite: bool = False) -> list:
    """Settle ``--resume`` (or the config's ``resume``) and ``--overwrite``
    before anything starts; return the warnings to show."""
    # what mmengine would do: resume=True resumes from load_from, or from
    # the work dir's latest checkpoint without one
    request = resume_arg
    if request is None and cfg.get('resume', False):
        request = cfg.get('load_from', None) or 'auto'
    try:
        resume, note = resolve_resume(cfg.work_dir, request, overwrite)
    except OSError as err:
        _error(str(err))
    notes = [note] if note else []
    restarts = os.environ.get('SLURM_RESTART_COUNT', '0')
    if request is None and restarts not in ('', '0'):
        notes.insert(
            0, f'this slurm job was requeued (SLURM_RESTART_COUNT='
            f'{restarts}) but --resume was not given: training starts from '
            'the beginning')
    if request is not None:
        cfg.resume = resume
        if resume:
            cfg.load_from = None if request == 'auto' else request
    return notes


def _lock(work_dir: str) -> WorkDirLock:
    """Take the work dir, or end with one line naming the run that has
    it."""
    lock = WorkDirLock(work_dir, command=' '.join(sys.argv))
    try:
        lock.acquire()
    except WorkDirBusyError as err:
        _error(str(err))
    except OSError as err:
        _error(f'cannot use work dir {work_dir}: {err}')
    return lock


def main() -> None:
    args = parse_args()
    if not osp.isfile(args.config):
        _error(f'config file not found: {args.config}')
    cfg = load_config(args.config)
    cfg.launcher = args.launcher
    try:
        # before --cfg-options: a path given there wins
        apply_data_root(cfg, args.data_root)
        merge_cfg_options(cfg, args.cfg_options, args.cfg_new_keys)
    except (ValueError, FileNotFoundError) as err:
        _error(str(err))

    if args.work_dir is not None:
        cfg.work_dir = args.work_dir
    elif cfg.get('work_dir', None) is None:
        cfg.work_dir = osp.join('./work_dirs',
                                osp.splitext(osp.basename(args.config))[0])
    changed = []  # what the convenience flags change, printed
    if args.amp:
        enable_amp(cfg)
        changed.append('--amp: optim_wrapper.type = AmpOptimWrapper')
    if args.on_data_error is not None:
        cfg[CHECKED_DATASET_KEY] = dict(
            cfg.get(CHECKED_DATASET_KEY, None) or {},
            on_error=args.on_data_error)
        changed.append(f'--on-data-error: {CHECKED_DATASET_KEY}.on_error = '
                       f'{args.on_data_error!r}')
    notes = _resume(cfg, args.resume, args.overwrite)
    if cfg.get('runner_type', None) != RUNNER_TYPE:
        notes.append(
            f'{args.config} does not declare mmlocat\'s runtime '
            f'(runner_type = {RUNNER_TYPE!r}, README "The runtime"): no '
            'preemption checkpoint, no exact resume, no atomic checkpoints, '
            'no data-file checks')
        if args.on_data_error is not None:
            _error('--on-data-error needs mmlocat\'s runtime (runner_type = '
                   f'{RUNNER_TYPE!r} in the config)')
    if args.check_data or cfg.get('check_data', False):
        if not check_before_run(cfg):
            sys.exit(1)
    try:  # a misspelt hook / loop keyword fails now, not at its first use
        check_component_arguments(cfg)
    except ValueError as err:
        _error(str(err))
    # rank 0 alone guards the work dir; the others wait for it in the
    # process group (and the launcher ends them if it refuses)
    lock = _lock(cfg.work_dir) if launcher_rank(args.launcher) == 0 else None
    if lock is not None and lock.stale is not None:
        notes.append(f'took over {lock.path} of pid {lock.stale.get("pid")} '
                     f'on {lock.stale.get("host")}: {lock.stale["reason"]}')
    if lock is not None:  # one copy of each line, first thing
        for line in changed:
            print(f'train.py: {line}', file=sys.stderr)
        for note in notes:
            print(f'train.py: warning: {note}', file=sys.stderr)
    try:
        with _exit_on_signals():
            if 'runner_type' in cfg:
                runner = RUNNERS.build(cfg)
            else:
                runner = Runner.from_cfg(cfg)
            for note in notes:
                runner.logger.warning(note)
            runner.train()
            # every rank done, then the process group's threads joined
            # before the interpreter exits (a gloo rank left them running
            # and was aborted at exit)
            if dist.is_available() and dist.is_initialized():
                dist.barrier()
                dist.destroy_process_group()
    except CheckpointWriteError as err:
        _error(str(err), status=1)
    finally:
        if lock is not None:
            lock.release()


if __name__ == '__main__':
    main()
