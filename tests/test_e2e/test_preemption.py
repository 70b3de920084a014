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
  rank stops after the same iteration and the resume is exact per rank;
* a signal before the first iteration ends the run without a checkpoint.
"""
import os
import os.path as osp
import signal
import stat
from typing import NamedTuple

import pytest
import torch
from helpers.harness import run_tool
from tiny_cls import (paused_pid, paused_run, probe_env, read_losses, resume,
                      run_train, train_command, write_tiny_cls_config)

from mmlocat.utils import mmengine_checkpoint_globals
from mmlocat.utils.work_dir_lock import LOCK_NAME

pytestmark = pytest.mark.e2e

# scontrol stand-in: records its arguments and what the work dir holds when
# it is called (the checkpoint must be there: it is written atomically)
STUB_SCONTROL = """#!/usr/bin/env bash
printf '%s\\n' "$@" > "$SCONTROL_RECORD"
ls "$SCONTROL_WORK" >> "$SCONTROL_RECORD"
"""


class Case(NamedTuple):
    epochs: int  # 0: iteration-based
    iters: int
    every: int  # checkpoint interval (iterations, or epochs)
    workers: int
    stop_at: int  # the iteration after which the signal arrives
    signum: int
    group: bool  # signal every process of the run, not only the trainer
    slurm: bool


CASES = {
    'iter_workers2_sigterm_group':
    Case(0, 8, 3, 2, 5, signal.SIGTERM, True, False),
    'epoch_workers0_sigusr1_slurm':
    Case(2, 10, 1, 0, 7, signal.SIGUSR1, False, True),
}


def _stub_slurm(env: dict, tmp_path, work: str) -> str:
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    stub = bin_dir / 'scontrol'
    stub.write_text(STUB_SCONTROL)
    stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
    record = str(tmp_path / 'scontrol.txt')
    env.update(
        PATH=f'{bin_dir}{os.pathsep}{env["PATH"]}',
        SLURM_JOB_ID='4242',
        SCONTROL_RECORD=record,
        SCONTROL_WORK=work)
    return record


def _check_stopped(work: str, stop_at: int, out: str, name: str) -> str:
    """The checkpoint of ``stop_at`` is there and named by
    last_checkpoint; the lock and temporary files are gone."""
    stop_ckpt = osp.join(work, f'iter_{stop_at}.pth')
    assert f'{name} received: saved {stop_ckpt} after iteration ' \
        f'{stop_at}' in out
    with open(osp.join(work, 'last_checkpoint')) as f:
        assert f.read() == stop_ckpt
    assert not osp.exists(osp.join(work, LOCK_NAME))
    assert not [f for f in os.listdir(work) if f.endswith('.tmp')]
    return stop_ckpt


def _check_same(resumed: dict, reference: dict, first: int, last: int) -> None:
    """Exactly the iterations ``first..last`` (of every rank), each loss
    bit for bit the uninterrupted run's."""
    steps = sorted({k[1] if isinstance(k, tuple) else k for k in resumed})
    assert steps == list(range(first, last + 1))
    for key, loss in resumed.items():
        assert loss == reference[key], (key, loss, reference[key])


@pytest.mark.timeout(600)
@pytest.mark.parametrize('case', list(CASES))
@pytest.mark.slow
def test_signal_saves_then_resume_is_bit_identical(case, cls_reference,
                                                   tmp_path, repo_root,
                                                   subprocess_env):
    c = CASES[case]
    # the uninterrupted run (iter_workers2_sigterm_group's is the one of
    # test_resume_exact with 2 workers); its config is ours
    config, reference = cls_reference(
        iters=c.iters,
        batch_size=4,
        num_workers=c.workers,
        checkpoint_interval=c.every,
        epochs=c.epochs)
    assert sorted(reference) == list(range(1, c.iters + 1))

    work = str(tmp_path / 'run')
    losses = str(tmp_path / 'run.txt')
    env = probe_env(subprocess_env, losses=losses, pause_at=c.stop_at)
    record = _stub_slurm(env, tmp_path, work) if c.slurm else None
    with paused_run(train_command(config, work), env, repo_root,
                    losses) as proc:
        if c.group:
            os.killpg(proc.pid, c.signum)
        else:
            os.kill(proc.pid, c.signum)
        out, err = resume(proc, losses)
    assert proc.returncode == 128 + c.signum, err[-3000:]

    stop_ckpt = _check_stopped(work, c.stop_at, out,
                               signal.Signals(c.signum).name)
    with mmengine_checkpoint_globals():
        ckpt = torch.load(stop_ckpt, weights_only=True)
    assert ckpt['meta']['iter'] == c.stop_at
    # epochs completed (5 batches each); 0 for the iteration-based loop
    assert ckpt['meta']['epoch'] == (c.stop_at - 1) // 5 * bool(c.epochs)
    assert 'rng_state' in ckpt
    if c.slurm:
        with open(record) as f:
            called = f.read().split()
        assert called[:2] == ['requeue', '4242']
        assert osp.basename(stop_ckpt) in called[2:]
        assert 'requeued slurm job 4242' in out
    # the interrupted run agreed with the reference up to the signal
    _check_same(read_losses(losses), reference, 1, c.stop_at)

    resumed = str(tmp_path / 'resumed.txt')
    log = run_train(config, work, probe_env(subprocess_env, losses=resumed),
                    repo_root, '--resume')
    assert stop_ckpt in log
    if c.epochs:
        assert 'Advance the dataloader 2 of 5 batches into epoch 2' in log
    _check_same(read_losses(resumed), reference, c.stop_at + 1, c.iters)


@pytest.mark.timeout(900)
@pytest.mark.slow
def test_ddp_signal_to_one_rank_stops_every_rank_at_one_iteration(
        cls_reference, tmp_path, repo_root, subprocess_env):
    """2 gloo processes; only rank 1 gets SIGTERM. Both ranks must agree
    to stop after the same iteration, rank 0 writes the checkpoint (rank 1
    alone would not), both exit 143, rank 0 releases the work-dir lock,
    and ``--resume`` under the launcher continues bit-identically."""
    iters, every, stop_at = 6, 4, 3
    config, reference = cls_reference(
        iters=iters, batch_size=2, checkpoint_interval=every, procs=2)

    work = str(tmp_path / 'run')
    losses = str(tmp_path / 'run.txt')
    env = probe_env(subprocess_env, losses=losses, pause_at=stop_at)
    cmd = train_command(config, work, procs=2, env=env)
    with paused_run(cmd, env, repo_root, losses, ranks=2) as proc:
        os.kill(paused_pid(losses, rank=1), signal.SIGTERM)
        out, err = resume(proc, losses)
    assert proc.returncode != 0  # torchrun reports its workers' failure
    # both workers ended with the preemption status, not a crash
    assert err.count('exitcode  : 143') == 2, err[-3000:]
    stop_ckpt = _check_stopped(work, stop_at, out, 'SIGTERM')
    assert out.count(f'SIGTERM received: saved {stop_ckpt}') == 1  # rank 0
    _check_same(read_losses(losses, by_rank=True), reference, 1, stop_at)

    resumed = str(tmp_path / 'resumed.txt')
    run_train(
        config,
        work,
        probe_env(subprocess_env, losses=resumed),
        repo_root,
        '--resume',
        procs=2)
    after = read_losses(resumed, by_rank=True)
    assert {rank for rank, _ in after} == {0, 1}
    _check_same(after, reference, stop_at + 1, iters)


@pytest.mark.timeout(300)
def test_signal_before_the_first_iteration_saves_nothing(
        tiny_imagenet_root, tmp_path, repo_root, subprocess_env):
    config = write_tiny_cls_config(
        str(tmp_path / 'tiny.py'),
        repo_root,
        tiny_imagenet_root,
        iters=4,
        batch_size=4)
    work = str(tmp_path / 'run')
    losses = str(tmp_path / 'losses.txt')
    proc = run_tool(
        *train_command(config, work)[1:],
        env=probe_env(
            subprocess_env, losses=losses, signal_at_start='SIGTERM'),
        cwd=repo_root,
        timeout=240,
        isolate='the probe sends the run a SIGTERM: its exit status 143 '
        'is what is checked')
    assert proc.returncode == 143, proc.stderr[-3000:]
    assert ('SIGTERM received: before the first iteration: nothing to save'
            in proc.stdout)
    assert not osp.exists(losses)  # no iteration ran
    assert not [f for f in os.listdir(work) if f.endswith('.pth')]
    assert not osp.exists(osp.join(work, 'last_checkpoint'))
    assert not osp.exists(osp.join(work, LOCK_NAME))
