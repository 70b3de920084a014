"""A checkpoint write that fails stops training and loses nothing (issues
26 and 29).

A tiny classifier saves every 3 iterations with ``max_keep_ckpts=1`` (so
mmengine's own hook would delete ``iter_3.pth`` before writing
``iter_6.pth``). The write of ``iter_6.pth`` fails: a directory is in the
way, the disk is full (the process's file size limit, ``RLIMIT_FSIZE``,
makes the write fail with EFBIG after iteration 4) or the work dir is not
writable. Training must stop with one line naming the file and the cause,
``iter_3.pth`` and ``last_checkpoint`` must be byte for byte what they were,
and no partial or temporary file may be left.
"""
import hashlib
import os
import os.path as osp
import shutil

import pytest
import torch
from tiny_cls import (paused_run, probe_env, read_losses, resume, run_train,
                      tiny_imagenet, train_command, write_tiny_cls_config)

from mmlocat.utils import mmengine_checkpoint_globals
from mmlocat.utils.work_dir_lock import LOCK_NAME

pytestmark = pytest.mark.e2e

ITERS, EVERY, PAUSE = 8, 3, 4


@pytest.fixture(scope='module')
def imagenet_root(tmp_path_factory) -> str:
    return tiny_imagenet(str(tmp_path_factory.mktemp('imagenet')))


def _digest(path: str) -> str:
    with open(path, 'rb') as f:
        return hashlib.sha256(f.read()).hexdigest()


def _plant(fault: str, work: str) -> dict:
    """Prepare ``fault``; returns extra probe variables."""
    if fault == 'directory_in_the_way':
        os.makedirs(osp.join(work, f'iter_{2 * EVERY}.pth'))
        return {}
    if fault == 'disk_full':
        # ~400 kB checkpoints; the log and the config dump stay far below
        return dict(fsize_at=PAUSE, fsize=150_000)
    return {}


def _unprivileged() -> list:
    """A command prefix under which permission bits hold: none for a
    normal user; for root, ``setpriv`` without the capabilities that let
    root write into a read-only folder."""
    if os.geteuid() != 0:
        return []
    if shutil.which('setpriv') is None:
        pytest.skip('root without setpriv writes into a read-only folder')
    return ['setpriv', '--bounding-set', '-dac_override,-dac_read_search']


CAUSES = dict(
    directory_in_the_way='a directory is in the way',
    disk_full='the file size limit is exceeded',
    not_writable='the folder is not writable')


@pytest.mark.timeout(600)
@pytest.mark.parametrize('fault', list(CAUSES))
@pytest.mark.slow
def test_failed_write_stops_and_keeps_the_previous_checkpoint(
        fault, imagenet_root, tmp_path, repo_root, subprocess_env):
    prefix = _unprivileged() if fault == 'not_writable' else []
    config = write_tiny_cls_config(
        str(tmp_path / 'tiny.py'),
        repo_root,
        imagenet_root,
        iters=ITERS,
        batch_size=4,
        checkpoint_interval=EVERY)
    work = str(tmp_path / 'run')
    os.makedirs(work)
    losses = str(tmp_path / 'losses.txt')
    env = probe_env(
        subprocess_env, losses=losses, pause_at=PAUSE, **_plant(fault, work))
    cmd = [
        *prefix, *train_command(config, work, '--cfg-options',
                                'default_hooks.checkpoint.max_keep_ckpts=1')
    ]
    try:
        with paused_run(cmd, env, repo_root, losses) as proc:
            previous = osp.join(work, f'iter_{EVERY}.pth')
            pointer = osp.join(work, 'last_checkpoint')
            before = _digest(previous), _digest(pointer)
            if fault == 'not_writable':
                os.chmod(work, 0o555)
            out, err = resume(proc, losses)
    finally:
        os.chmod(work, 0o755)

    failed = osp.join(work, f'iter_{2 * EVERY}.pth')
    assert proc.returncode == 1, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith(f'train.py: error: cannot write {failed}: '
                           f'{CAUSES[fault]}'), last
    assert f'last_checkpoint still names {previous}; training stops' in last
    assert 'Traceback' not in err
    assert f'cannot write {failed}' in out  # and in the log
    assert (_digest(previous), _digest(pointer)) == before
    with mmengine_checkpoint_globals():
        saved = torch.load(previous, weights_only=True)
    assert saved['meta']['iter'] == EVERY
    assert not osp.isfile(failed)
    assert not [f for f in os.listdir(work) if f.endswith('.tmp')]
    # the lock is gone, except from a folder the run could not write to
    assert osp.exists(osp.join(work, LOCK_NAME)) == (fault == 'not_writable')

    if fault == 'disk_full':
        # nothing was lost: --resume continues from iteration 3 and ends
        resumed = str(tmp_path / 'resumed.txt')
        log = run_train(config, work,
                        probe_env(subprocess_env,
                                  losses=resumed), repo_root, '--resume')
        assert previous in log
        assert sorted(read_losses(resumed)) == list(
            range(EVERY + 1, ITERS + 1))


def _file_size_limit(limit: int):
    """A ``preexec_fn``: the child may write files of ``limit`` bytes (as
    ``ulimit -f``; Python ignores SIGXFSZ, so a larger write fails with
    EFBIG)."""
    import resource

    def set_limit():
        hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))

    return set_limit


@pytest.mark.timeout(300)
def test_config_dump_over_the_file_size_limit_names_the_file(
        imagenet_root, tmp_path, repo_root, subprocess_env):
    """``ulimit -f`` hit the Runner's config dump: a bare ``OSError: [Errno
    27] File too large`` naming no file, and half a config left behind
    (issue 35). The dump is written completely or not at all and the
    error names the file and the fix."""
    import re
    import subprocess
    config = write_tiny_cls_config(
        str(tmp_path / 'tiny.py'),
        repo_root,
        imagenet_root,
        iters=ITERS,
        batch_size=4)
    # the limit lets mmengine copy each config file while loading it
    # (< 5 kB each) and the work-dir lock be written; two notes of 4 kB,
    # each in a file of its own, make the dumped config larger
    bases = [config]
    for k in range(2):
        bases.append(str(tmp_path / f'note{k}.py'))
        with open(bases[-1], 'w') as f:
            f.write(f'note{k} = {"x" * 4000!r}\n')
    config = str(tmp_path / 'noted.py')
    with open(config, 'w') as f:
        f.write(f'_base_ = {bases!r}\n')
    work = str(tmp_path / 'run')
    proc = subprocess.run(
        train_command(config, work),
        env=probe_env(subprocess_env),
        cwd=repo_root,
        capture_output=True,
        text=True,
        timeout=240,
        preexec_fn=_file_size_limit(8192))
    assert proc.returncode == 1, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert re.fullmatch(
        f'train.py: error: cannot write {re.escape(work)}/'
        r'(\d{8}_\d{6}/vis_data/config|noted)\.py: the file size limit is '
        r'exceeded \(File too large\); nothing was written \(the copy of the '
        r'config the run keeps\): raise the file size limit \(ulimit -f\) '
        'and run again', last), last
    dumps = [
        osp.join(root, f) for root, _, files in os.walk(work) for f in files
        if f.endswith('.py') or f.endswith('.tmp')
    ]
    assert dumps == [], dumps  # no half config, no temporary file
