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
  the checkpoint is complete, and the resume continues inside the epoch;
* 2 gloo processes (``tools/dist_train.sh``), SIGTERM to rank 1 only: every
  rank stops after the same iteration and the resume is exact per rank.
"""
import os
import os.path as osp
import signal
import socket
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


def _signal_when_paused(cmd,
                        env,
                        cwd,
                        losses,
                        signum,
                        group,
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
        epochs=0,
        iters=8,
        every=3,
        workers=2,
        stop_at=5,
        signum=signal.SIGTERM,
        group=True,
        slurm=False),
    epoch_workers0_sigusr1_slurm=dict(
        epochs=2,
        iters=10,
        every=1,
        workers=0,
        stop_at=7,
        signum=signal.SIGUSR1,
        group=False,
        slurm=True),
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


@pytest.mark.timeout(900)
def test_ddp_signal_to_one_rank_stops_every_rank_at_one_iteration(
        imagenet_root, tmp_path, repo_root, subprocess_env):
    """2 gloo processes; only rank 1 gets SIGTERM. Both ranks must agree
    to stop after the same iteration, rank 0 writes the checkpoint (rank 1
    alone would not), both exit 143, rank 0 releases the work-dir lock,
    and ``--resume`` under the launcher continues bit-identically."""
    iters, every, stop_at = 6, 4, 3
    config = write_tiny_cls_config(
        str(tmp_path / 'tiny.py'),
        repo_root,
        imagenet_root,
        iters=iters,
        batch_size=2,
        checkpoint_interval=every)

    def dist(work, losses, *extra, **probe):
        env = probe_env(subprocess_env, losses=losses, **probe)
        env['PORT'] = str(_free_port())
        return [
            'bash', 'tools/dist_train.sh', config, '2', '--work-dir', work,
            *extra
        ], env

    ref_losses = str(tmp_path / 'ref.txt')
    cmd, env = dist(str(tmp_path / 'ref'), ref_losses)
    ref = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        env=env,
        cwd=repo_root,
        timeout=400)
    assert ref.returncode == 0, ref.stderr[-3000:]
    reference = _ranked_losses(ref_losses)

    work = str(tmp_path / 'run')
    losses = str(tmp_path / 'run.txt')
    cmd, env = dist(work, losses, pause_at=stop_at)
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=repo_root,
        text=True,
        start_new_session=True)
    try:
        deadline = time.time() + 400
        while not all(osp.exists(f'{losses}.pid.{r}') for r in (0, 1)):
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.time() < deadline, 'the run never reached the pause'
            time.sleep(0.1)
        with open(f'{losses}.pid.1') as f:
            os.kill(int(f.read()), signal.SIGTERM)  # rank 1 only
        open(losses + '.go', 'w').close()
        out, err = proc.communicate(timeout=400)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode != 0  # torchrun reports its workers' failure
    # both workers ended with the preemption status, not a crash
    assert err.count('exitcode  : 143') == 2, err[-3000:]
    stop_ckpt = osp.join(work, f'iter_{stop_at}.pth')
    assert out.count(f'SIGTERM received: saved {stop_ckpt}') == 1  # rank 0
    with open(osp.join(work, 'last_checkpoint')) as f:
        assert f.read() == stop_ckpt
    assert not osp.exists(osp.join(work, LOCK_NAME))
    before = _ranked_losses(losses)
    assert sorted(before) == sorted(
        (r, s) for r in (0, 1) for s in range(1, stop_at + 1))

    resumed_losses = str(tmp_path / 'resumed.txt')
    cmd, env = dist(work, resumed_losses, '--resume')
    resumed = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        env=env,
        cwd=repo_root,
        timeout=400)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    after = _ranked_losses(resumed_losses)
    assert sorted(after) == sorted(
        (r, s) for r in (0, 1) for s in range(stop_at + 1, iters + 1))
    for key, loss in after.items():
        assert loss == reference[key], (key, loss, reference[key])


def _ranked_losses(path: str) -> dict:
    """(rank, iteration) -> loss."""
    out = {}
    with open(path) as f:
        for line in f:
            rank, step, value = line.split()
            out[int(rank), int(step)] = float.fromhex(value)
    return out


@pytest.mark.timeout(300)
def test_signal_before_the_first_iteration_saves_nothing(
        imagenet_root, tmp_path, repo_root, subprocess_env):
    config = write_tiny_cls_config(
        str(tmp_path / 'tiny.py'),
        repo_root,
        imagenet_root,
        iters=4,
        batch_size=4)
    work = str(tmp_path / 'run')
    losses = str(tmp_path / 'losses.txt')
    proc = subprocess.run(
        [sys.executable, 'tools/train.py', config, '--work-dir', work],
        capture_output=True,
        text=True,
        env=probe_env(
            subprocess_env, losses=losses, signal_at_start='SIGTERM'),
        cwd=repo_root,
        timeout=240)
    assert proc.returncode == 143, proc.stderr[-3000:]
    assert ('SIGTERM received: before the first iteration: nothing to save'
            in proc.stdout)
    assert not osp.exists(losses)  # no iteration ran
    assert not [f for f in os.listdir(work) if f.endswith('.pth')]
    assert not osp.exists(osp.join(work, 'last_checkpoint'))
    assert not osp.exists(osp.join(work, LOCK_NAME))
