"""SIGTERM / SIGUSR1 save a checkpoint, then ``--resume`` is exact (issue 26).

A tiny LocAtViT classifier (random crops, flips, Mixup/CutMix, dropout,
drop path: every generator is consumed) is signalled while it waits after
a known iteration; the preemption hook saves that iteration's checkpoint
and the process exits with 128 + the signal number. ``--resume`` must then
reproduce every later loss of an uninterrupted run bit for bit.

* iteration-based loop, 2 dataloader workers, SIGTERM to the whole process
  group (as slurm signals every process of a job step): the workers must
  survive it;
* epoch-based loop, signal in the middle of the second epoch, SIGUSR1
  under a (stub) slurm: the job is requeued with ``scontrol requeue`` once
  the checkpoint is complete, and the resume continues inside the epoch.
"""
import os
import os.path as osp
import signal
import stat
import subprocess
import sys
import time

import pytest
import torch
from tiny_cls import probe_env, run_train, write_tiny_cls_config

from mmlocat.testing import generate
from mmlocat.utils.work_dir_lock import LOCK_NAME

# scontrol stand-in: records its arguments and whether the checkpoint the
# run announced was already complete (loadable) when it was called
STUB_SCONTROL = """#!/usr/bin/env bash
printf '%s\\n' "$@" > "$SCONTROL_RECORD"
ls "$SCONTROL_WORK" >> "$SCONTROL_RECORD"
"""


@pytest.fixture(scope='module')
def imagenet_root(tmp_path_factory) -> str:
    root = str(tmp_path_factory.mktemp('imagenet'))
    return generate(
        'imagenet', root, num_train=2, num_val=1, img_size=(40, 40),
        seed=0)['data_root']


def _losses(path: str) -> dict:
    """iteration -> float loss (the last record of each iteration)."""
    out = {}
    with open(path) as f:
        for line in f:
            _, step, value = line.split()
            out[int(step)] = float.fromhex(value)
    return out


def _signal_when_paused(cmd, env, cwd, losses, signum, group,
                        timeout=300) -> subprocess.CompletedProcess:
    """Run ``cmd``; once the probe pauses, send ``signum`` (to the whole
    process group if ``group``), let the probe continue and wait."""
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        text=True,
        start_new_session=True)
    deadline = time.time() + timeout
    try:
        while not osp.exists(losses + '.paused'):
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.time() < deadline, 'the run never reached the pause'
            time.sleep(0.1)
        if group:
            os.killpg(proc.pid, signum)
        else:
            os.kill(proc.pid, signum)
        open(losses + '.go', 'w').close()
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


CASES = dict(
    iter_workers2_sigterm_group=dict(
        epochs=0, iters=8, every=3, workers=2, stop_at=5,
        signum=signal.SIGTERM, group=True, slurm=False),
    epoch_workers0_sigusr1_slurm=dict(
        epochs=2, iters=10, every=1, workers=0, stop_at=7,
        signum=signal.SIGUSR1, group=False, slurm=True),
)


@pytest.mark.timeout(600)
@pytest.mark.parametrize('case', list(CASES))
def test_signal_saves_then_resume_is_bit_identical(case, imagenet_root,
                                                   tmp_path, repo_root,
                                                   subprocess_env):
    c = CASES[case]
    config = write_tiny_cls_config(
        str(tmp_path / 'tiny.py'),
        repo_root,
        imagenet_root,
        iters=c['iters'],
        batch_size=4,
        num_workers=c['workers'],
        checkpoint_interval=c['every'],
        epochs=c['epochs'])

    ref_losses = str(tmp_path / 'ref.txt')
    run_train(config, str(tmp_path / 'ref'),
              probe_env(subprocess_env, losses=ref_losses), repo_root)
    reference = _losses(ref_losses)
    assert sorted(reference) == list(range(1, c['iters'] + 1))

    work = str(tmp_path / 'run')
    run_losses = str(tmp_path / 'run.txt')
    env = probe_env(subprocess_env, losses=run_losses, pause_at=c['stop_at'])
    record = str(tmp_path / 'scontrol.txt')
    if c['slurm']:
        bin_dir = tmp_path / 'bin'
        bin_dir.mkdir()
        stub = bin_dir / 'scontrol'
        stub.write_text(STUB_SCONTROL)
        stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
        env.update(
            PATH=f'{bin_dir}{os.pathsep}{env["PATH"]}',
            SLURM_JOB_ID='4242',
            SCONTROL_RECORD=record,
            SCONTROL_WORK=work)
    done = _signal_when_paused(
        [sys.executable, 'tools/train.py', config, '--work-dir', work], env,
        repo_root, run_losses, c['signum'], c['group'])

    assert done.returncode == 128 + c['signum'], done.stderr[-3000:]
    stop_ckpt = osp.join(work, f'iter_{c["stop_at"]}.pth')
    name = signal.Signals(c['signum']).name
    assert f'{name} received: saved {stop_ckpt} after iteration ' \
        f'{c["stop_at"]}' in done.stdout
    with open(osp.join(work, 'last_checkpoint')) as f:
        assert f.read() == stop_ckpt
    ckpt = torch.load(stop_ckpt, weights_only=True)
    assert ckpt['meta']['iter'] == c['stop_at']
    assert ckpt['meta']['epoch'] == (c['stop_at'] - 1) // 5 * bool(
        c['epochs'])  # epochs completed: 5 batches each
    assert 'rng_state' in ckpt
    assert not osp.exists(osp.join(work, LOCK_NAME))
    assert not [f for f in os.listdir(work) if f.endswith('.tmp')]
    if c['slurm']:
        with open(record) as f:
            called = f.read().split()
        assert called[:2] == ['requeue', '4242']
        assert osp.basename(stop_ckpt) in called[2:]
        assert 'requeued slurm job 4242' in done.stdout
    # the interrupted run agreed with the reference up to the signal
    before = _losses(run_losses)
    assert sorted(before) == list(range(1, c['stop_at'] + 1))
    assert all(before[s] == reference[s] for s in before)

    resumed_losses = str(tmp_path / 'resumed.txt')
    log = run_train(config, work,
                    probe_env(subprocess_env, losses=resumed_losses),
                    repo_root, '--resume')
    assert stop_ckpt in log
    if c['epochs']:
        assert 'Advance the dataloader 2 of 5 batches into epoch 2' in log
    resumed = _losses(resumed_losses)
    assert sorted(resumed) == list(range(c['stop_at'] + 1, c['iters'] + 1))
    for step, loss in resumed.items():
        assert loss == reference[step], (step, loss, reference[step])
