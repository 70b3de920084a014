"""Shared measurement code of the LocAtViT benchmarks.

Every measurement runs in a fresh Python subprocess (this file run as a
script with one JSON job), so peak memory is not polluted by the previous
measurement. Peak memory is

* on CUDA: ``torch.cuda.max_memory_allocated`` over the timed steps minus
  the memory allocated before them (model, input);
* on CPU: the growth of the process's maximum resident set size
  (``resource.getrusage(RUSAGE_SELF).ru_maxrss``) from just before the
  first (warm-up) step to the end. The model and the input already exist
  at the baseline, so the growth is the activations / workspace of one
  step: the warm-up step already reaches the peak a timed step reaches.
  ``ru_maxrss`` is a high-water mark kept by the kernel, so short-lived
  peaks (a transient N x N bias) are counted, which sampling would miss.

A job is a dict: ``model`` ('vit': LocAtViT with ``gaug=False, prr=False``,
the plain ViT twin; 'locat'; or 'config': the mmlocat backbone config
given as ``backbone``, e.g. ``dict(type='mmlocat.CLIPViT', arch='l',
with_cp=True)``), ``impl`` (the GAug kernel), ``mode`` ('infer':
forward under ``torch.no_grad`` in eval mode; 'train': forward + backward
in train mode), ``arch`` (an alias or an arch dict), ``size``, ``batch``,
``iters``, ``warmup``, ``device``, ``amp``, ``amp_dtype`` ('fp16' or
'bf16'; default fp16 on CUDA, bf16 on CPU), ``sdpa`` ('flash': the plain
attention restricted to SDPA's flash kernel; default: SDPA's choice),
``threads`` (0: torch's default) and ``clock`` ('wall' or 'cpu': process
CPU time, which is robust to other processes sharing the cores; use it
with one thread).
"""
import json
import os.path as osp
import resource
import statistics
import subprocess
import sys
import time
from contextlib import nullcontext
from functools import partial
from typing import List

__all__ = ['measure', 'run_job', 'add_step_args']


def run_job(job: dict) -> dict:
    """Build the model, warm up, time ``iters`` steps; in this process."""
    import torch

    from mmlocat.models.backbones import LocAtViT
    from mmlocat.models.layers import resolve_gaug_impl
    if job.get('threads'):
        torch.set_num_threads(job['threads'])
    device = torch.device(job['device'])
    locat = job['model'] == 'locat'
    train = job['mode'] == 'train'
    if job['model'] == 'config':
        import mmlocat  # noqa: F401  (registers the mmlocat scope)
        from mmlocat.registry import MODELS
        model = MODELS.build(job['backbone']).to(device)
    else:
        model = LocAtViT(
            job['arch'],
            img_size=job['size'],
            gaug=locat,
            prr=locat,
            gaug_cfg=dict(impl=job.get('impl', 'auto'))).to(device)
    model.train(train)
    x = torch.randn(job['batch'], 3, job['size'], job['size'], device=device)
    amp_dtype = dict(
        fp16=torch.float16, bf16=torch.bfloat16)[job.get(
            'amp_dtype', 'fp16' if device.type == 'cuda' else 'bf16')]
    kernels = nullcontext
    if job.get('sdpa') == 'flash':
        from torch.nn.attention import SDPBackend, sdpa_kernel
        kernels = partial(sdpa_kernel, SDPBackend.FLASH_ATTENTION)

    def step() -> None:
        with torch.autocast(
                device.type, dtype=amp_dtype, enabled=job['amp']), \
                torch.set_grad_enabled(train), kernels():
            out = model(x)[0]
        if train:
            out.float().pow(2).mean().backward()
            model.zero_grad(set_to_none=True)

    def sync() -> None:
        if device.type == 'cuda':
            torch.cuda.synchronize(device)

    rss_base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    for _ in range(job['warmup']):
        step()
    sync()
    if device.type == 'cuda':
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
    # 'cpu': process CPU time (all threads), robust to other processes
    # competing for the cores; 'wall': elapsed time.
    clock = time.process_time if job.get('clock') == 'cpu' else \
        time.perf_counter
    times = []
    for _ in range(job['iters']):
        start = clock()
        step()
        sync()
        times.append(clock() - start)
    if device.type == 'cuda':
        peak = torch.cuda.max_memory_allocated(device) - base
    else:
        peak = resource.getrusage(
            resource.RUSAGE_SELF).ru_maxrss * 1024 - rss_base
    used = None
    if locat:
        n = model.num_extra_tokens + (job['size'] // 16)**2
        q = torch.empty(1, 1, n, 1, device=device)
        used = resolve_gaug_impl(job.get('impl', 'auto'), q, train)
    return dict(
        ms=1e3 * statistics.median(times),
        ms_min=1e3 * min(times),
        peak_mb=peak / 2**20,
        impl=used)


def add_step_args(parser, batch: int, iters: int) -> None:
    """The options of a measured step the benchmarks share: ``--batch``,
    ``--iters``, ``--warmup``, ``--device``, ``--amp``."""
    parser.add_argument('--batch', type=int, default=batch)
    parser.add_argument('--iters', type=int, default=iters)
    parser.add_argument('--warmup', type=int, default=1)
    parser.add_argument('--device', default='cpu')
    parser.add_argument(
        '--amp', action='store_true', help='autocast (fp16 CUDA, bf16 CPU)')


def measure(job: dict) -> dict:
    """Run :func:`run_job` in a fresh subprocess; ``{'error': ...}`` if it
    fails (e.g. out of memory)."""
    proc = subprocess.run(
        [sys.executable, __file__, json.dumps(job)],
        capture_output=True,
        text=True)
    lines: List[str] = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        err = (proc.stderr.strip().splitlines() or ['killed'])[-1]
        return dict(error=f'rc={proc.returncode}: {err[:60]}')
    return json.loads(lines[-1])


if __name__ == '__main__':
    # The repository root, so a checkout without ``pip install -e`` works.
    sys.path.insert(
        0, osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))
    print(json.dumps(run_job(json.loads(sys.argv[1]))))
