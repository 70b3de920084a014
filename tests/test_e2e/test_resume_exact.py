"""``--resume`` after SIGKILL continues bit-identically (item 5, issue 15).

A tiny LocAtViT classifier trains 8 iterations with random crops, flips,
Mixup/CutMix, dropout and drop path (every generator is consumed), saving
a checkpoint every 3 iterations. A second run is SIGKILLed after iteration
5 (its last checkpoint: iteration 3), then resumed with ``--resume``; every
loss of iterations 4-8 must equal the uninterrupted run's bit for bit.
Once with ``num_workers=0`` (augmentation in the main process) and once
with 2 workers.
"""
import os
import os.path as osp
import signal

import pytest
import torch
from tiny_cls import (paused_run, probe_env, read_losses, run_train,
                      train_command)

from mmlocat.utils import mmengine_checkpoint_globals

pytestmark = pytest.mark.e2e

ITERS, EVERY, KILL_AFTER = 8, 3, 5


@pytest.mark.timeout(600)
@pytest.mark.parametrize('num_workers', [0, 2])
@pytest.mark.slow
def test_resume_after_sigkill_is_bit_identical(num_workers, cls_reference,
                                               tmp_path, repo_root,
                                               subprocess_env):
    # the uninterrupted run (shared with test_preemption's
    # iter_workers2_sigterm_group for 2 workers); its config is ours
    config, reference = cls_reference(
        iters=ITERS,
        batch_size=4,
        num_workers=num_workers,
        checkpoint_interval=EVERY)
    assert sorted(reference) == list(range(1, ITERS + 1))

    # interrupted run: SIGKILL while paused after iteration KILL_AFTER
    work = str(tmp_path / 'run')
    run_losses = str(tmp_path / 'run.txt')
    env = probe_env(subprocess_env, losses=run_losses, pause_at=KILL_AFTER)
    with paused_run(train_command(config, work), env, repo_root,
                    run_losses) as proc:
        os.killpg(proc.pid, signal.SIGKILL)  # the trainer and its workers
        proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert osp.isfile(osp.join(work, f'iter_{EVERY}.pth'))
    assert not osp.exists(osp.join(work, f'iter_{2 * EVERY}.pth'))
    with mmengine_checkpoint_globals():
        ckpt = torch.load(
            osp.join(work, f'iter_{EVERY}.pth'), weights_only=True)
    assert set(ckpt['rng_state']['state']) >= {'python', 'numpy', 'torch'}
    assert ckpt['rng_state']['data']['num_workers'] == num_workers

    resumed_losses = str(tmp_path / 'resumed.txt')
    log = run_train(config, work,
                    probe_env(subprocess_env, losses=resumed_losses),
                    repo_root, '--resume')
    assert f'iter_{EVERY}.pth' in log
    resumed = read_losses(resumed_losses)
    assert sorted(resumed) == list(range(EVERY + 1, ITERS + 1))
    for step, loss in resumed.items():
        assert loss == reference[step], (step, loss, reference[step])
    # the killed run agreed with the reference up to the kill, too
    before = read_losses(run_losses)
    assert all(before[s] == reference[s] for s in range(1, KILL_AFTER + 1))
