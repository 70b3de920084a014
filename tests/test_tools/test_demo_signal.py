"""tools/demo.py passes a SIGTERM on to its training process: no orphan
keeps training after the demo is stopped (e.g. by ``timeout``)."""
import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.e2e


def _children(pid: int):
    path = f'/proc/{pid}/task/{pid}/children'
    with open(path) as f:
        return [int(p) for p in f.read().split()]


def _cmdline(pid: int) -> str:
    try:
        with open(f'/proc/{pid}/cmdline', 'rb') as f:
            return f.read().replace(b'\0', b' ').decode()
    except FileNotFoundError:
        return ''


@pytest.mark.skipif(
    not os.path.exists(f'/proc/{os.getpid()}/task/{os.getpid()}/children'),
    reason='needs Linux /proc children lists')
def test_sigterm_stops_the_training_process(tmp_path, repo_root,
                                            subprocess_env):
    # isolation is the point: a signal to a process and its child
    demo = subprocess.Popen([
        sys.executable, 'tools/demo.py', '--work-dir',
        str(tmp_path / 'work'), '--data-root',
        str(tmp_path / 'data')
    ],
                            cwd=repo_root,
                            env=subprocess_env,
                            stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT,
                            text=True)
    deadline = time.time() + 300
    trainer = None
    while trainer is None and time.time() < deadline:
        assert demo.poll() is None, demo.stdout.read()
        trainer = next((pid for pid in _children(demo.pid)
                        if 'tools/train.py' in _cmdline(pid)), None)
        time.sleep(0.5)
    assert trainer is not None, 'tools/train.py never started'
    demo.send_signal(signal.SIGTERM)
    out, _ = demo.communicate(timeout=300)
    assert demo.returncode != 0
    assert '[demo] training stopped' in out, out[-3000:]
    # the training process is gone, not orphaned
    assert not os.path.exists(f'/proc/{trainer}') or \
        'tools/train.py' not in _cmdline(trainer)
