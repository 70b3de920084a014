"""CLIPContrastiveLoss against open_clip's ClipLoss, on 1 and 2 processes.

Two gloo processes (CPU) each hold half of a batch of unit-norm features;
the loss and the features' gradients must equal open_clip's ``ClipLoss``
(``gather_with_grad=True``, with and without ``local_loss``) on the same
ranks, and the loss must equal the 1-process loss of the whole batch
(every rank's for the full loss, their mean for the local loss).
"""
import os
import socket
import subprocess
import sys

import open_clip
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

from mmlocat.models.losses import CLIPContrastiveLoss

BATCH, DIM = 6, 8


def _features(seed=0):
    g = torch.Generator().manual_seed(seed)
    image = F.normalize(torch.randn(2 * BATCH, DIM, generator=g), dim=-1)
    text = F.normalize(torch.randn(2 * BATCH, DIM, generator=g), dim=-1)
    return image, text, torch.tensor(12.5)


def test_single_process_equals_open_clip():
    image, text, scale = _features()
    for local in (False, True):
        ours = CLIPContrastiveLoss(local_loss=local)(image, text, scale)
        ref = open_clip.ClipLoss(local_loss=local)(image, text, scale)
        torch.testing.assert_close(ours, ref, rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match='differ in shape'):
        CLIPContrastiveLoss()(image, text[:-1], scale)


def _worker(rank, port, out):
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port))
    dist.init_process_group('gloo', rank=rank, world_size=2)
    image, text, scale = _features()
    part = slice(rank * BATCH, (rank + 1) * BATCH)
    result = {}
    for local in (False, True):
        losses, grads = [], []
        for module in (CLIPContrastiveLoss(local_loss=local),
                       open_clip.ClipLoss(
                           local_loss=local,
                           gather_with_grad=True,
                           rank=rank,
                           world_size=2)):
            img = image[part].clone().requires_grad_()
            txt = text[part].clone().requires_grad_()
            loss = module(img, txt, scale)
            loss.backward()
            losses.append(loss.detach())
            grads.append(torch.cat([img.grad, txt.grad]))
        result[local] = (losses, grads)
    out[rank] = result
    dist.destroy_process_group()


def _free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _run_two_ranks(path):
    """Fork the two ranks; the results go to ``path`` (torch.save)."""
    out = mp.Manager().dict()
    mp.start_processes(
        _worker,
        args=(_free_port(), out),
        nprocs=2,
        join=True,
        start_method='fork')
    torch.save({rank: out[rank] for rank in (0, 1)}, path)


@pytest.mark.timeout(120)
def test_two_gloo_processes_equal_open_clip_and_one_process(
        tmp_path, subprocess_env):
    # fork keeps the ranks cheap (no fresh imports), but forking the test
    # process itself deadlocks once earlier tests have started threads
    # (tqdm's monitor, intra-op pools): fork from a fresh interpreter.
    path = tmp_path / 'ranks.pth'
    proc = subprocess.run(
        [sys.executable, __file__, str(path)],
        env=subprocess_env,
        capture_output=True,
        text=True,
        timeout=110)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = torch.load(path)
    image, text, scale = _features()
    whole = open_clip.ClipLoss()(image, text, scale)
    for local in (False, True):
        per_rank = []
        for rank in (0, 1):
            (ours, ref), (g_ours, g_ref) = out[rank][local]
            torch.testing.assert_close(ours, ref, rtol=0, atol=1e-6)
            torch.testing.assert_close(g_ours, g_ref, rtol=0, atol=1e-6)
            per_rank.append(float(ours))
        if local:
            assert abs(sum(per_rank) / 2 - float(whole)) <= 1e-5
        else:
            assert all(abs(v - float(whole)) <= 1e-5 for v in per_rank)


if __name__ == '__main__':
    _run_two_ranks(sys.argv[1])
