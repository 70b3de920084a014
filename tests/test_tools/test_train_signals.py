"""tools/train.py's signal handling around the run."""
import signal

import pytest

SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


@pytest.fixture
def saved_handlers():
    saved = {s: signal.getsignal(s) for s in SIGNALS}
    yield saved
    for signum, handler in saved.items():
        signal.signal(signum, handler)


def test_a_signal_during_the_run_exits_with_its_status(load_tool,
                                                       saved_handlers):
    train = load_tool('tools/train.py', 'train_tool')
    with pytest.raises(SystemExit) as exc:
        with train._exit_on_signals():
            signal.raise_signal(signal.SIGUSR1)
    assert exc.value.code == 128 + signal.SIGUSR1


def test_a_repeated_signal_cannot_cut_the_exit_short(load_tool,
                                                     saved_handlers):
    """torchrun SIGTERMs the other ranks once one has exited: a rank that
    is already leaving (SystemExit) must finish unwinding and exit with
    its own status, not die of the repeat."""
    train = load_tool('tools/train.py', 'train_tool')
    with pytest.raises(SystemExit) as exc:
        with train._exit_on_signals():
            raise SystemExit(143)
    assert exc.value.code == 143
    for signum in SIGNALS:
        assert signal.getsignal(signum) == signal.SIG_IGN, signum
    signal.raise_signal(signal.SIGTERM)  # ignored: the test goes on


def test_a_finished_run_restores_the_handlers(load_tool, saved_handlers):
    train = load_tool('tools/train.py', 'train_tool')
    with train._exit_on_signals():
        assert signal.getsignal(
            signal.SIGTERM) not in (saved_handlers[signal.SIGTERM],
                                    signal.SIG_IGN)
    for signum in SIGNALS:
        assert signal.getsignal(signum) == saved_handlers[signum], signum
