"""WorkDirLock: one live run per work dir; stale locks are recognised."""
import json
import os
import os.path as osp
import socket
import subprocess
import sys

import pytest

from mmlocat.utils.work_dir_lock import (LOCK_NAME, WorkDirBusyError,
                                         WorkDirLock)


def _write_lock(work_dir, **holder) -> str:
    os.makedirs(work_dir, exist_ok=True)
    record = dict(
        host=socket.gethostname(),
        pid=os.getpid(),
        start_time=None,
        started='2026-01-01 00:00:00',
        slurm_job_id=None,
        slurm_restart_count=0,
        command='tools/train.py cfg.py')
    record.update(holder)
    path = osp.join(work_dir, LOCK_NAME)
    with open(path, 'w') as f:
        json.dump(record, f)
    return path


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, '-c', 'pass'])
    proc.wait()
    return proc.pid


@pytest.fixture(autouse=True)
def no_slurm(monkeypatch):
    monkeypatch.delenv('SLURM_JOB_ID', raising=False)
    monkeypatch.delenv('SLURM_RESTART_COUNT', raising=False)


def test_lock_records_the_run_and_is_released(tmp_path):
    work = str(tmp_path / 'new' / 'work')  # created on the way
    with WorkDirLock(work, command='train.py a.py') as lock:
        with open(osp.join(work, LOCK_NAME)) as f:
            holder = json.load(f)
        assert holder['pid'] == os.getpid()
        assert holder['host'] == socket.gethostname()
        assert holder['command'] == 'train.py a.py'
        assert lock.stale is None
        with pytest.raises(WorkDirBusyError) as info:
            WorkDirLock(work).acquire()  # a second run: this live process
        assert str(info.value).startswith(
            f'work dir {work} is in use by another training run: pid '
            f'{os.getpid()} on host {socket.gethostname()} since ')
        assert ': train.py a.py. Two runs in one work dir' in str(info.value)
    assert not osp.exists(osp.join(work, LOCK_NAME))


def test_release_leaves_a_lock_that_is_not_its_own(tmp_path):
    lock = WorkDirLock(str(tmp_path)).acquire()
    path = _write_lock(str(tmp_path), pid=1, host='elsewhere')
    lock.release()
    assert osp.exists(path)


def test_dead_process_on_this_host_is_stale(tmp_path):
    pid = _dead_pid()
    _write_lock(str(tmp_path), pid=pid)
    lock = WorkDirLock(str(tmp_path)).acquire()
    assert lock.stale['reason'] == f'its process {pid} is gone'
    with open(lock.path) as f:
        assert json.load(f)['pid'] == os.getpid()
    lock.release()
    assert os.listdir(tmp_path) == []  # nothing set aside is left


def test_reused_pid_is_stale(tmp_path):
    # this process is alive, but started at another time than recorded
    _write_lock(str(tmp_path), start_time='1')
    lock = WorkDirLock(str(tmp_path)).acquire()
    assert lock.stale['reason'] == (
        f'pid {os.getpid()} now belongs to another process')
    lock.release()


def test_other_host_is_never_guessed(tmp_path):
    path = _write_lock(str(tmp_path), host='node-7', pid=_dead_pid())
    with pytest.raises(WorkDirBusyError) as info:
        WorkDirLock(str(tmp_path)).acquire()
    message = str(info.value)
    assert 'pid' in message and 'on host node-7' in message
    assert message.endswith(f'If that run is known to be gone, delete {path}')


def test_unreadable_lock_is_never_guessed(tmp_path):
    path = osp.join(str(tmp_path), LOCK_NAME)
    with open(path, 'w') as f:
        f.write('garbage')
    with pytest.raises(WorkDirBusyError, match='cannot be read'):
        WorkDirLock(str(tmp_path)).acquire()


def test_requeued_slurm_job_takes_over_its_own_lock(tmp_path, monkeypatch):
    # the first start of job 77 ran on another node and was killed
    _write_lock(
        str(tmp_path), host='node-7', slurm_job_id='77', slurm_restart_count=0)
    monkeypatch.setenv('SLURM_JOB_ID', '77')
    monkeypatch.setenv('SLURM_RESTART_COUNT', '1')
    lock = WorkDirLock(str(tmp_path)).acquire()
    assert lock.stale['reason'] == (
        'an earlier start of slurm job 77 (requeued)')
    lock.release()
    # the same start of the same job (two launches at once): busy
    _write_lock(
        str(tmp_path), host='node-7', slurm_job_id='77', slurm_restart_count=1)
    with pytest.raises(WorkDirBusyError, match=r'\(slurm job 77\)'):
        WorkDirLock(str(tmp_path)).acquire()
