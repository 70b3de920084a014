"""2-process DDP (gloo, CPU) == 1 process at twice the batch (issue 15).

A tiny LocAtViT classifier (LayerNorm only, no BatchNorm; no dropout, no
random augmentation or batch mixing, ordered sampler) trains 6 iterations
through ``tools/dist_train.sh`` with 2 processes x batch 2 and through
``tools/train.py`` with 1 process x batch 4. mmengine's sampler gives rank
``r`` samples ``r, r + 2, ...``, so each iteration sees the same 4 images
in both runs. The mean of the two ranks' losses must equal the single
process's loss, and the final weights must agree, within 1e-5.

The optimizer is SGD with momentum: the weights are then a smooth
function of the averaged gradients. AdamW divides each gradient by its own
magnitude, so the float32 round-off in gradients that are analytically
zero (the key bias of attention: softmax ignores it) becomes a +-lr step
that differs between the two runs (measured 1.8e-5 after 6 steps) --
round-off amplified by the optimizer, not a difference of DDP.
"""
import os.path as osp

import pytest
import torch
from tiny_cls import probe_env, read_losses, run_train, write_tiny_cls_config

from mmlocat.testing import generate
from mmlocat.utils import mmengine_checkpoint_globals

pytestmark = pytest.mark.e2e

ITERS = 6


@pytest.mark.timeout(600)
@pytest.mark.slow
def test_two_gloo_processes_equal_one_at_twice_the_batch(
        tmp_path, repo_root, subprocess_env):
    root = generate(
        'imagenet',
        str(tmp_path / 'data'),
        num_train=3,
        num_val=1,
        img_size=(32, 32),
        seed=1)['data_root']

    runs = {}
    for name, procs, batch in (('single', 1, 4), ('ddp', 2, 2)):
        config = write_tiny_cls_config(
            str(tmp_path / f'{name}.py'),
            repo_root,
            root,
            iters=ITERS,
            batch_size=batch,
            random_train=False,
            optimizer=dict(type='SGD', lr=0.05, momentum=0.9))
        work = str(tmp_path / name)
        losses = str(tmp_path / f'{name}.txt')
        run_train(
            config,
            work,
            probe_env(subprocess_env, losses=losses),
            repo_root,
            timeout=300,
            procs=procs)
        with mmengine_checkpoint_globals():
            ckpt = torch.load(
                osp.join(work, f'iter_{ITERS}.pth'), weights_only=True)
        runs[name] = (read_losses(losses, by_rank=True), ckpt['state_dict'])

    single, single_weights = runs['single']
    ddp, ddp_weights = runs['ddp']
    assert sorted(single) == [(0, i) for i in range(1, ITERS + 1)]
    assert sorted(ddp) == sorted(
        (r, i) for r in (0, 1) for i in range(1, ITERS + 1))
    loss_diff = {
        step: abs((ddp[0, step] + ddp[1, step]) / 2 - single[0, step])
        for step in range(1, ITERS + 1)
    }
    weight_diff = max(
        float((ddp_weights[k].float() - v.float()).abs().max())
        for k, v in single_weights.items())
    print(f'DDP vs single: max loss diff {max(loss_diff.values()):.3g}, '
          f'max weight diff {weight_diff:.3g}')
    assert all(d <= 1e-5 for d in loss_diff.values()), loss_diff
    # the run must have learned something for the weight check to matter
    assert single[0, ITERS] != single[0, 1]
    assert single_weights.keys() == ddp_weights.keys()
    for key, value in single_weights.items():
        torch.testing.assert_close(
            ddp_weights[key], value, rtol=0, atol=1e-5, msg=key)
