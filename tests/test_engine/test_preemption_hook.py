"""PreemptionHook's signal handling in one process (the end-to-end runs
are in tests/test_e2e/test_preemption.py).

* bad arguments are named;
* a signal is only recorded; outside training (``before_test``) the old
  handlers come back and a recorded signal reaches them;
* torch DataLoader workers forked while the hook is installed survive
  SIGTERM / SIGUSR1 from outside and still deliver batches, while other
  forked children (a multiprocessing pool) are ended by SIGTERM as usual.
"""
import multiprocessing
import os
import signal
import subprocess
import time

import pytest
import torch
from torch.utils.data import DataLoader

from mmlocat.engine import PreemptionHook


@pytest.mark.parametrize(
    'kwargs, message',
    [(dict(signals=('SIGNOPE', )), "unknown signal 'SIGNOPE'"),
     (dict(signals=('SIGTERM', ), requeue_signals=('SIGUSR1', )),
      r"requeue_signals must be among signals, got \['SIGUSR1'\]"),
     (dict(exit_code=300), 'exit_code must be 0-255')])
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PreemptionHook(**kwargs)
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def _wait_for(condition, timeout=5.0) -> bool:
    deadline = time.time() + timeout
    while not condition() and time.time() < deadline:
        time.sleep(0.01)
    return condition()


@pytest.fixture
def usr1_recorder():
    calls = []
    previous = signal.signal(signal.SIGUSR1, lambda s, f: calls.append(s))
    yield calls
    signal.signal(signal.SIGUSR1, previous)


def test_signal_is_recorded_then_handed_back_outside_training(usr1_recorder):
    hook = PreemptionHook(signals=('SIGUSR1', ), requeue_signals=('SIGUSR1', ))
    os.kill(os.getpid(), signal.SIGUSR1)
    assert _wait_for(lambda: hook.received == signal.SIGUSR1)
    assert usr1_recorder == []  # recorded only
    hook.before_test(None)  # e.g. tools/test.py with a training config
    assert _wait_for(lambda: usr1_recorder == [signal.SIGUSR1])
    assert hook.received is None
    os.kill(os.getpid(), signal.SIGUSR1)  # the old handler is back
    assert _wait_for(lambda: len(usr1_recorder) == 2)


class _Pids(torch.utils.data.Dataset):

    def __len__(self) -> int:
        return 10**6

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.tensor([os.getpid()])


def _sleep() -> None:
    time.sleep(60)


def test_dataloader_workers_survive_outside_signals():
    hook = PreemptionHook()
    try:
        loader = DataLoader(
            _Pids(),
            batch_size=1,
            num_workers=2,
            multiprocessing_context='fork')
        batches = iter(loader)
        workers = {int(next(batches)) for _ in range(8)}
        assert len(workers) == 2
        # as slurm signals every process of a step: from another process
        # (SIGTERM from the parent ends a worker, as torch intends)
        for name in ('TERM', 'USR1'):
            subprocess.run(['kill', f'-{name}', *map(str, workers)],
                           check=True)
        time.sleep(0.5)
        assert {int(next(batches)) for _ in range(8)} == workers
        assert hook.received is None  # the main process got nothing
        del batches  # the workers end when their dataloader shuts down

        # any other forked child behaves as without the hook
        context = multiprocessing.get_context('fork')
        child = context.Process(target=_sleep)
        child.start()
        child.terminate()
        child.join(timeout=10)
        assert child.exitcode == -signal.SIGTERM
        started = time.time()
        with context.Pool(1) as pool:  # __exit__ terminates with SIGTERM
            assert pool.apply(os.getpid) != os.getpid()
        assert time.time() - started < 30
    finally:
        hook.after_train(_NoRunner)


class _NoRunner:
    """after_train only logs when a signal arrived (none here)."""
