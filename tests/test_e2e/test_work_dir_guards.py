"""``tools/train.py`` guards its work dir (issues 26 and 29).

* A second run into the work dir of a live run refuses to start, naming
  the first run's pid and host, with or without ``--resume``; the first
  run is not disturbed and removes its lock when it ends.
* ``--resume`` with an explicit path that does not exist (or a folder, or
  a ``last_checkpoint`` naming a missing file) is an error before anything
  starts; ``--resume`` that finds no checkpoint says so on stderr and in
  the log before training starts, instead of mmengine's "Auto resumed from
  the latest checkpoint None"; a fresh run over an earlier run's
  checkpoints is refused, naming the checkpoint, ``--resume`` and
  ``--overwrite`` (issue 33; it used to warn and overwrite them), and
  proceeds with either option.
"""
import glob
import hashlib
import os
import os.path as osp
import socket

import pytest
from helpers.harness import run_tool, tool_env
from tiny_cls import (paused_run, probe_env, resume, tiny_imagenet,
                      train_command, write_tiny_cls_config)

from mmlocat.utils.work_dir_lock import LOCK_NAME

pytestmark = pytest.mark.e2e


@pytest.fixture(scope='module')
def config(tmp_path_factory, repo_root) -> str:
    tmp = tmp_path_factory.mktemp('guards')
    root = tiny_imagenet(str(tmp / 'data'))
    return write_tiny_cls_config(
        str(tmp / 'tiny.py'), repo_root, root, iters=2, batch_size=4)


TRAIN = 'tools/train.py'


def _last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


@pytest.mark.timeout(600)
@pytest.mark.slow
def test_second_run_into_a_live_run_is_refused(config, tmp_path, repo_root,
                                               subprocess_env):
    work = str(tmp_path / 'work')
    losses = str(tmp_path / 'losses.txt')
    env = probe_env(subprocess_env, losses=losses, pause_at=1)
    with paused_run(train_command(config, work), env, repo_root,
                    losses) as first:
        assert osp.isfile(osp.join(work, LOCK_NAME))
        before = sorted(os.listdir(work))
        for extra in ((), ('--resume', )):
            second = run_tool(
                TRAIN,
                config,
                '--work-dir',
                work,
                *extra,
                env=probe_env(tool_env()),
                isolate='the work-dir lock of a live run in another '
                'process, as a user starts a second run')
            assert second.returncode == 2, second.stderr[-3000:]
            line = _last_line(second.stderr)
            assert line.startswith(
                f'train.py: error: work dir {work} is in use by another '
                f'training run: pid {first.pid} on host '
                f'{socket.gethostname()} since '), line
            assert f'--work-dir {work}' in line  # the first run's command
            assert 'use another --work-dir, or wait for that run' in line
            assert sorted(os.listdir(work)) == before  # nothing touched
        _, err = resume(first, losses)
    assert first.returncode == 0, err[-3000:]
    assert not osp.exists(osp.join(work, LOCK_NAME))


@pytest.mark.slow
def test_resume_path_that_does_not_exist_fails_first(config, tmp_path):
    work = str(tmp_path / 'work')
    missing = str(tmp_path / 'nothing.pth')
    proc = run_tool(TRAIN, config, '--work-dir', work, '--resume', missing)
    assert proc.returncode == 2
    assert _last_line(proc.stderr) == (
        f'train.py: error: --resume: checkpoint not found: {missing}')
    assert not osp.exists(work)  # nothing started

    proc = run_tool(TRAIN, config, '--work-dir', work, '--resume',
                    str(tmp_path))
    assert proc.returncode == 2
    assert _last_line(proc.stderr) == (
        f'train.py: error: --resume: {tmp_path} is a directory, not a '
        'checkpoint file')

    os.makedirs(work)
    gone = osp.join(work, 'iter_4.pth')
    with open(osp.join(work, 'last_checkpoint'), 'w') as f:
        f.write(gone)
    proc = run_tool(TRAIN, config, '--work-dir', work, '--resume')
    assert proc.returncode == 2
    assert _last_line(proc.stderr) == (
        f'train.py: error: --resume: {work}/last_checkpoint names {gone}, '
        'which does not exist (moved or deleted?); pass --resume PATH to '
        'choose a checkpoint')


@pytest.mark.timeout(600)
def _sha256(path: str) -> str:
    with open(path, 'rb') as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_resume_without_checkpoint_warns_and_overwrite_is_refused(
        config, tmp_path):
    work = str(tmp_path / 'work')
    proc = run_tool(TRAIN, config, '--work-dir', work, '--resume')
    assert proc.returncode == 0, proc.stderr[-3000:]
    warning = (f'--resume: no checkpoint to resume from in {work} (no '
               'last_checkpoint file): training starts from the beginning')
    # on stderr before anything of the run (mmengine logs to stdout)
    ours = [line for line in proc.stderr.splitlines() if 'train.py' in line]
    assert ours == [f'train.py: warning: {warning}']
    assert 'Auto resumed from the latest checkpoint None' not in proc.stdout
    (log, ) = glob.glob(osp.join(work, '*', '*.log'))
    with open(log) as f:
        lines = f.read().splitlines()
    at = next(i for i, line in enumerate(lines) if warning in line)
    first_iter = next(i for i, line in enumerate(lines) if '(train)' in line)
    assert 'WARNING' in lines[at] and at < first_iter
    assert osp.isfile(osp.join(work, 'iter_2.pth'))

    # a fresh run into that work dir: refused before anything starts,
    # the earlier run's files byte-identical
    ckpt = osp.join(work, 'iter_2.pth')
    before = {
        name: _sha256(osp.join(work, name))
        for name in os.listdir(work) if osp.isfile(osp.join(work, name))
    }
    proc = run_tool(TRAIN, config, '--work-dir', work)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert _last_line(proc.stderr) == (
        f'train.py: error: {work} holds the checkpoints of an earlier run '
        f'({ckpt}); a fresh run would overwrite them: pass --resume to '
        'continue that run, --overwrite to start from the beginning and '
        'overwrite them, or use another --work-dir')
    assert {
        name: _sha256(osp.join(work, name))
        for name in os.listdir(work) if osp.isfile(osp.join(work, name))
    } == before

    # --overwrite: starts over, saying what it allows
    proc = run_tool(TRAIN, config, '--work-dir', work, '--overwrite')
    assert proc.returncode == 0, proc.stderr[-3000:]
    ours = [line for line in proc.stderr.splitlines() if 'train.py' in line]
    assert ours == [
        f'train.py: warning: --overwrite: this run starts from the beginning '
        f'in {work}, which holds the checkpoints of an earlier run ({ckpt}): '
        'each checkpoint this run saves replaces the earlier one of the same '
        "name, and last_checkpoint will name this run's"
    ]
    assert _sha256(ckpt) != before['iter_2.pth']  # the new run's

    # --resume: continues that run (already at its last iteration)
    proc = run_tool(TRAIN, config, '--work-dir', work, '--resume')
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f'Auto resumed from the latest checkpoint {ckpt}.' in proc.stdout
    assert 'resumed epoch: 0, iter: 2' in proc.stdout
