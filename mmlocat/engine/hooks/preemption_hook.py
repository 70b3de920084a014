"""Save a resumable checkpoint when the job is told to stop.

Slurm (and torchrun, and ``kill``) end a process with SIGTERM: at the time
limit, on ``scancel`` and on preemption, each task of each job step gets
SIGTERM and, ``KillWait`` seconds later (30 by default), SIGKILL.
``--signal=USR1@120`` (``sbatch`` / ``srun``) asks for a warning signal 120
seconds before the time limit; ``sbatch --signal=B:USR1@120`` sends it to
the batch shell only (``tools/slurm_train.sh`` forwards it to its tasks).
``scontrol requeue JOBID`` puts a running batch job back into the queue;
the batch script then starts again from its beginning with the same job id
(sbatch(1), scontrol(1), slurm.conf(5), https://slurm.schedmd.com/).
"""
import logging
import os
import signal
import subprocess
import sys
import threading
from typing import Dict, Optional, Sequence

import torch
from mmengine.dist import all_reduce, barrier, get_world_size
from mmengine.hooks import CheckpointHook, Hook
from mmengine.logging import print_log
from mmengine.runner import EpochBasedTrainLoop

from mmlocat.registry import HOOKS
from .checkpoint_hook import atomic_backend_args, save_pointed

__all__ = ['PreemptionHook']

#: Seconds ``scontrol requeue`` may take before it is given up.
REQUEUE_TIMEOUT = 60

# What children forked while a PreemptionHook is installed get: DataLoader
# workers are guarded, other children get the previous dispositions.
_fork_policy: Dict[str, object] = dict(signals=(), previous={})
_DATALOADER_FILE = 'torch/utils/data/dataloader.py'


def _forked_by_dataloader() -> bool:
    """Whether this fresh child was forked while a torch DataLoader
    iterator started its workers (the forking frames are still on the
    child's stack)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename.replace(os.sep,
                                            '/').endswith(_DATALOADER_FILE):
            return True
        frame = frame.f_back
    return False


def _guard_worker(signals: tuple) -> None:
    """Keep this DataLoader worker alive on the preemption signals.

    torch's workers end themselves on a SIGTERM that does not come from
    their parent (a C handler installed in the worker); slurm signals every
    process of a step, so the workers would die before the main process
    reaches the iteration boundary and saves. Here the signals are blocked
    and consumed by a thread: SIGTERM from the parent (multiprocessing
    ends daemon workers so at exit) still ends the worker at once, as
    torch's handler does; the others are dropped, and the worker exits
    when the main process shuts its dataloader down.
    """
    parent = os.getppid()
    signal.pthread_sigmask(signal.SIG_BLOCK, signals)  # already, by the fork

    def consume() -> None:
        while True:
            info = signal.sigwaitinfo(signals)
            if info.si_signo == signal.SIGTERM and info.si_pid == parent:
                os._exit(0)

    threading.Thread(
        target=consume, name='mmlocat-preemption-guard', daemon=True).start()


def _before_fork() -> None:
    """Hold the hook's signals back across the fork: in the child they
    wait until its handlers are what they should be (below)."""
    signals = _fork_policy['signals']
    if signals:
        _fork_policy['mask'] = signal.pthread_sigmask(signal.SIG_BLOCK,
                                                      signals)


def _after_fork_in_parent() -> None:
    mask = _fork_policy.pop('mask', None)
    if mask is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _after_fork_in_child() -> None:
    """A DataLoader worker is guarded (:func:`_guard_worker`); any other
    forked child (a multiprocessing pool) gets the handlers it would have
    had without the hook, and then a signal that arrived meanwhile."""
    mask = _fork_policy.pop('mask', None)
    signals = _fork_policy['signals']
    if not signals or mask is None:
        return
    if _forked_by_dataloader() and hasattr(signal, 'sigwaitinfo'):
        _guard_worker(signals)
        return
    for signum, previous in _fork_policy['previous'].items():
        signal.signal(signum, previous)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)


_fork_handlers_registered = False


def _register_fork_handlers() -> None:
    """Install the fork handlers once, when the first hook is built
    (importing mmlocat registers nothing; they cannot be unregistered and
    do nothing while no hook has set ``_fork_policy``)."""
    global _fork_handlers_registered
    if not _fork_handlers_registered and hasattr(os, 'register_at_fork'):
        os.register_at_fork(
            before=_before_fork,
            after_in_parent=_after_fork_in_parent,
            after_in_child=_after_fork_in_child)
        _fork_handlers_registered = True


def _signal_number(name) -> signal.Signals:
    try:
        return signal.Signals[name] if isinstance(name, str) else \
            signal.Signals(name)
    except (KeyError, ValueError):
        valid = ', '.join(
            s.name for s in (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2,
                             signal.SIGINT))
        raise ValueError(f'PreemptionHook: unknown signal {name!r}; use a '
                         f'name such as {valid}') from None


@HOOKS.register_module()
class PreemptionHook(Hook):
    """Turn SIGTERM / SIGUSR1 into a checkpoint, then a clean exit.

    The handlers are installed when the hook is built. A handler only
    records the signal. DataLoader workers forked meanwhile ignore these
    signals (unless SIGTERM comes from their parent), so they keep running
    when the whole job step is signalled (slurm signals every process of a
    step; torch's workers would end themselves on SIGTERM); this needs the
    ``fork`` start method, OpenMMLab's default
    ``env_cfg.mp_cfg.mp_start_method``, on Linux. At the next
    training iteration boundary (``after_train_iter``, after the
    checkpoint and logger hooks; every rank agrees through one all-reduce
    per iteration in distributed runs) the hook

    1. saves a checkpoint of that iteration, ``iter_N.pth`` in the checkpoint
       hook's folder (unless the checkpoint hook has just saved it) and
       points ``last_checkpoint`` at it once it is complete; inside an
       epoch of an epoch-based loop too (``--resume`` continues inside the
       epoch with :class:`mmlocat.engine.ResumableEpochBasedTrainLoop`);
    2. on rank 0, for a signal in ``requeue_signals`` under slurm
       (``SLURM_JOB_ID`` set), runs ``scontrol requeue $SLURM_JOB_ID``: a
       batch job submitted with ``--requeue`` (or on a cluster whose
       ``JobRequeue`` default allows it) goes back to the queue and its
       script runs again, so that script should pass ``--resume``. SIGTERM
       does not requeue: it is also what ``scancel`` sends, and slurm
       requeues preempted jobs itself (``PreemptMode=REQUEUE``);
    3. exits with ``exit_code`` (default ``128 + signal number``: 143 for
       SIGTERM, 138 for SIGUSR1, the status of a process ended by that
       signal, so a pipeline ``train && test`` stops and the scheduler
       records an interrupted run, not success). Slurm has no universal
       "requeue me" status; a site's ``RequeueExit=N`` is served by
       ``exit_code=N``.

    A signal that arrives before the first iteration ends the run at
    ``before_train`` without a checkpoint (nothing was trained). A signal
    during validation takes effect after it. Outside training (the same
    config in ``tools/test.py``) the hook puts the previous handlers back
    as soon as testing starts, so SIGTERM ends a test run as usual.

    mmlocat's runtime (``runner_type = 'mmlocat.MMLocatRunner'``) adds the
    hook, under any launcher; a config may also name it in
    ``custom_hooks`` (to set its arguments).

    Args:
        signals: Signal names (or numbers) that stop training.
        requeue_signals: The subset that also requeues a slurm job.
        requeue: Requeue under slurm at all.
        exit_code: Exit status after the checkpoint; ``None`` for
            ``128 + signal number``.
    """
    priority = 'LOWEST'  # after CheckpointHook and LoggerHook

    def __init__(self,
                 signals: Sequence = ('SIGTERM', 'SIGUSR1'),
                 requeue_signals: Sequence = ('SIGUSR1', ),
                 requeue: bool = True,
                 exit_code: Optional[int] = None) -> None:
        self.signals = [_signal_number(s) for s in signals]
        self.requeue_signals = {_signal_number(s) for s in requeue_signals}
        unknown = self.requeue_signals.difference(self.signals)
        if unknown:
            raise ValueError(
                'PreemptionHook: requeue_signals must be among signals, '
                f'got {sorted(s.name for s in unknown)} not in '
                f'{[s.name for s in self.signals]}')
        if exit_code is not None and not 0 <= exit_code <= 255:
            raise ValueError(f'PreemptionHook: exit_code must be 0-255 (an '
                             f'exit status), got {exit_code}')
        self.requeue = requeue
        self.exit_code = exit_code
        self.received: Optional[int] = None
        self._pid = os.getpid()
        self._training = False
        self._previous: Dict[int, object] = {}
        try:
            for signum in self.signals:
                previous = signal.signal(signum, self._on_signal)
                # None: a handler not set from Python; restore the default
                self._previous[signum] = (
                    signal.SIG_DFL if previous is None else previous)
        except ValueError as err:  # not the main thread
            self._uninstall()
            print_log(
                f'PreemptionHook: cannot handle signals here ({err}); a '
                'signal ends training without a checkpoint',
                logger='current',
                level=logging.WARNING)
            return
        # a child runs no Python handler of its parent: the defaults
        # (SIG_DFL / SIG_IGN), or SIG_DFL for a parent's Python handler
        _register_fork_handlers()
        _fork_policy.update(
            signals=tuple(self.signals),
            previous={
                s:
                p if p in (signal.SIG_DFL, signal.SIG_IGN) else signal.SIG_DFL
                for s, p in self._previous.items()
            })

    # -- signal handling ------------------------------------------------

    def _on_signal(self, signum: int, frame) -> None:
        # No logging here: the signal may interrupt a logging call that
        # holds the handler's lock.
        if os.getpid() != self._pid:  # a child: act as without the hook
            signal.signal(signum,
                          _fork_policy['previous'].get(signum, signal.SIG_DFL))
            signal.raise_signal(signum)
            return
        if self.received is None:
            self.received = signum

    def _uninstall(self) -> None:
        if os.getpid() != self._pid:
            return
        _fork_policy.update(signals=(), previous={})
        for signum, previous in self._previous.items():
            if signal.getsignal(signum) == self._on_signal:
                signal.signal(signum, previous)
        self._previous = {}

    def _stand_down(self) -> None:
        """Not training (a test / val run): behave as if never installed,
        delivering a signal that arrived meanwhile to the old handler."""
        if self._training or not self._previous:
            return
        self._uninstall()
        if self.received is not None:
            signum, self.received = self.received, None
            signal.raise_signal(signum)

    def before_val(self, runner) -> None:
        self._stand_down()

    def before_test(self, runner) -> None:
        self._stand_down()

    # -- training -------------------------------------------------------

    def before_train(self, runner) -> None:
        self._training = True
        loop = runner.train_loop
        if isinstance(loop, EpochBasedTrainLoop) and not hasattr(
                loop, 'batches_to_skip'):
            runner.logger.warning(
                f'PreemptionHook: {type(loop).__name__} cannot resume '
                'inside an epoch; a checkpoint saved on a signal mid-epoch '
                'will restart that epoch from its first batch on --resume. '
                "Use train_cfg type='mmlocat.ResumableEpochBasedTrainLoop' "
                '(tools/train.py does) to continue where it stopped.')
        signum = self._agreed_signal()
        if signum is not None:
            self._stop(runner, signum, None)

    def after_train_iter(self,
                         runner,
                         batch_idx: int,
                         data_batch=None,
                         outputs=None) -> None:
        signum = self._agreed_signal()
        if signum is not None:
            self._stop(runner, signum, self._save(runner))

    def after_train(self, runner) -> None:
        self._training = False
        self._uninstall()
        if self.received is not None:
            runner.logger.warning(
                f'{signal.Signals(self.received).name} arrived after the '
                'last training iteration: training is complete, nothing '
                'else to save')

    def _agreed_signal(self) -> Optional[int]:
        """The signal any rank received (the same answer on every rank)."""
        received = self.received or 0
        if get_world_size() > 1:
            flag = torch.tensor([received], dtype=torch.int64)
            all_reduce(flag, op='max')
            received = int(flag.item())
        return received or None

    def _save(self, runner) -> str:
        """Checkpoint of the iteration just finished; return its path."""
        hook = next((h for h in runner.hooks if isinstance(h, CheckpointHook)),
                    None)
        step = runner.iter + 1
        if hook is not None and hook.out_dir is not None:
            out_dir = hook.out_dir
        else:
            out_dir = runner.work_dir
        if hook is not None and not hook.by_epoch:
            filename = hook.filename_tmpl.format(step)
        else:
            filename = f'iter_{step}.pth'
        path = os.path.join(out_dir, filename)
        if hook is not None and runner.message_hub.get_info(
                'last_ckpt') == path and os.path.isfile(path):
            return path  # the checkpoint hook saved this iteration already
        return save_pointed(
            runner,
            out_dir,
            filename,
            save_optimizer=getattr(hook, 'save_optimizer', True),
            save_param_scheduler=getattr(hook, 'save_param_scheduler', True),
            meta=dict(epoch=runner.epoch, iter=step),
            by_epoch=False,
            backend_args=atomic_backend_args(
                out_dir, getattr(hook, 'backend_args', None),
                getattr(hook, 'file_client_args', None)))

    def _stop(self, runner, signum: int, checkpoint: Optional[str]) -> None:
        barrier()  # rank 0 has written the checkpoint before anyone exits
        name = signal.Signals(signum).name
        code = self.exit_code if self.exit_code is not None else 128 + signum
        if checkpoint is None:
            what = 'before the first iteration: nothing to save'
        else:
            what = (f'saved {checkpoint} after iteration {runner.iter + 1}; '
                    'continue with --resume')
        runner.logger.warning(f'{name} received: {what}')
        if signum in self.requeue_signals:
            self._requeue(runner)
        runner.logger.warning(f'exiting with status {code}')
        self._uninstall()
        raise SystemExit(code)

    def _requeue(self, runner) -> None:
        job = os.environ.get('SLURM_JOB_ID')
        if not self.requeue or not job or runner.rank != 0:
            return
        cmd = ['scontrol', 'requeue', job]
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, timeout=REQUEUE_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired) as err:
            print_log(
                f'could not requeue slurm job {job}: {" ".join(cmd)}: {err}',
                logger='current',
                level=logging.WARNING)
            return
        if proc.returncode != 0:
            print_log(
                f'could not requeue slurm job {job} ({" ".join(cmd)} '
                f'exited with {proc.returncode}: '
                f'{(proc.stderr or proc.stdout).strip()}); only batch jobs '
                'that may be requeued (sbatch --requeue) can be',
                logger='current',
                level=logging.WARNING)
            return
        runner.logger.warning(
            f'requeued slurm job {job}: it starts again from its batch '
            'script, which should pass --resume')
