"""One-command GPU check of the GAug kernels: exactness, compilations, cost.

Prints ONE table (and exits 1 if any exactness row fails):

* ``exact`` rows: one ViT-B attention layer (12 heads of 64) with GAug
  (training grid 14x14, weights far from init) at 224^2, 512x683 (grid
  32x43, the padded input), 480x640 and 1024^2, with 0 and 4 registers,
  under fp32, bf16 autocast and fp16 autocast: the output (``fwd``) and the
  gradients of the input, the qkv weight and the GAug parameters (``bwd``,
  the worst of them) of ``flex``, ``chunked`` and -- as the baseline the
  low-precision rows are judged against -- ``dense`` in that dtype, each as
  the max abs error over the max abs value of the float32 dense
  reference. ``compiles``: FlexAttention compilations the row caused (the
  design: one per new (shape, dtype, grad) key; ``fallback`` if a compile
  failed and the chunked kernel ran).
* ``train`` rows: a train step (forward + backward, bf16 autocast) of
  LocAtViT-B with the flex / chunked / dense (the public code's
  materialised bias) GAug kernels and of the plain ViT-B (same network,
  ``gaug=False, prr=False``) restricted to SDPA's flash kernel, at 224 /
  512 / 1024 with realistic batches (64 / 16 / 4): time per step, peak
  memory (``max_memory_allocated`` growth), and both as a ratio to the ViT.
* ``infer`` rows: the same at 1024^2, inference, batch 1.

On the GPU machine (python3.12, torch, no OpenMMLab; nothing can be
downloaded there) the pure-Python wheels travel with the checkout. Here::

    echo /.whl/ >> .git/info/exclude
    python3 -m pip download --no-deps --only-binary=:all: \\
        --python-version 3.12 --implementation cp \\
        --platform manylinux2014_x86_64 -d .whl \\
        mmengine==0.10.7 mmcv-lite==2.1.0 mmpretrain==1.2.0 addict \\
        termcolor yapf platformdirs mat4py model-index ordered-set \\
        importlib-metadata==8.7.0

and there, with ``.whl`` carried::

    python3 -m pip install -q --no-index --no-deps --no-compile \\
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
    PYTHONUNBUFFERED=1 python3 tools/analysis_tools/gpu_check.py

mmcv-lite has no compiled ops; nothing here needs them: importing
``mmlocat.models.backbones.LocAtViT`` pulls in mmcv's pure-Python
``cnn`` bricks and, when mmseg / mmdet are absent, nothing else (the test
of this script runs it with ``mmcv._ext``, mmseg, mmdet and open_clip made
unimportable). ``--device cpu --quick`` is the smoke test of the suite
(tiny arch and sizes, eager flex, no memory figures).

Budget: the full run is sized for <= 8 minutes on one H200; ``--time-budget``
skips (and says so in the table) what would start after it.
"""
import argparse
import math
import os.path as osp
import sys
import time
from functools import partial
from typing import Dict, List, Optional, Sequence

import torch

sys.path.insert(0, osp.dirname(osp.abspath(__file__)))
# The repository root, so a checkout without ``pip install -e`` works.
sys.path.insert(0,
                osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))

# isort: off
from bench_utils import run_job  # noqa: E402
from mmlocat.models.layers import (  # noqa: E402
    GaussianAugment, flex_compile_stats, gaug_attention,
    set_flex_compile_budget)
from mmlocat.models.layers.gaug import flex as gaug_flex  # noqa: E402
# isort: on

DTYPES = dict(fp32=None, bf16=torch.bfloat16, fp16=torch.float16)
# Error bounds relative to the reference's scale: float32 round-off; for
# autocast rows the error of the same order as the dense bias's own error
# in that dtype (3x it, or 8 roundings of that dtype if larger): the
# kernels round at other points than the dense path (the chunked backward
# accumulates in float32, the dense one in the autocast dtype).
FP32_TOL = 1e-4
DENSE_FACTOR = 3
LOW_TOL = dict(bf16=8 * 2.**-8, fp16=8 * 2.**-11)

FULL = dict(
    exact_sizes=[(224, 224), (512, 683), (480, 640), (1024, 1024)],
    heads=12,
    head_dims=64,
    train=[(224, 64), (512, 16), (1024, 4)],
    infer=[(1024, 1)],
    arch='b',
    iters=5,
    warmup=2)
# The suite's smoke test: the same code on tiny shapes.
QUICK = dict(
    exact_sizes=[(48, 64)],
    heads=2,
    head_dims=8,
    train=[(32, 2)],
    infer=[(48, 1)],
    arch=dict(
        embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=64),
    iters=1,
    warmup=1)

COLUMNS = ('check', 'size', 'regs', 'dtype', 'impl', 'fwd', 'bwd', 'ok', 'ms',
           'MB', 'x time', 'x MB', 'compiles', 'note')
WIDTHS = (5, 9, 4, 5, 7, 8, 8, 4, 8, 8, 6, 6, 8, 0)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--device', default='cuda')
    parser.add_argument(
        '--quick',
        action='store_true',
        help='tiny shapes and arch (the smoke test of the suite)')
    parser.add_argument(
        '--time-budget',
        type=float,
        default=450.,
        help='seconds; rows that would start later are skipped')
    parser.add_argument(
        '--sections',
        nargs='+',
        default=['exact', 'train', 'infer'],
        choices=['exact', 'train', 'infer'])
    return parser.parse_args(argv)


class Table:
    """Prints the rows of the one table as they come."""

    def __init__(self) -> None:
        self.failed = 0
        cells = [f'{c:>{w}}' if w else c for c, w in zip(COLUMNS, WIDTHS)]
        header = ' | '.join(cells)
        print(header)
        print('-' * len(header), flush=True)

    def row(self, **cells) -> None:
        if cells.get('ok') == 'FAIL':
            self.failed += 1
        out = []
        for col, width in zip(COLUMNS, WIDTHS):
            value = cells.get(col.replace(' ', '_'), '')
            if isinstance(value, float):
                value = f'{value:.1e}' if col in ('fwd', 'bwd') else \
                    f'{value:.2f}' if col.startswith('x') else f'{value:.1f}'
            out.append(f'{value!s:>{width}}' if width else str(value))
        print(' | '.join(out), flush=True)


def _grid(size: Sequence[int]) -> tuple:
    """Patch grid of an input (16-pixel patches, padded like the hosts)."""
    return tuple(math.ceil(s / 16) for s in size)


def _attention_case(hw, regs, heads, head_dims, device, batch):
    """A GAug attention layer far from init and its input."""
    torch.manual_seed(0)
    gaug = GaussianAugment(head_dims, (14, 14), 1 + regs).to(device)
    with torch.no_grad():
        for p in gaug.parameters():
            p.normal_(0, 0.3)
    channels = heads * head_dims
    qkv = torch.nn.Linear(channels, 3 * channels).to(device)
    n = 1 + regs + hw[0] * hw[1]
    x = torch.randn(batch, n, channels, device=device)
    weight = torch.randn(batch, heads, n, head_dims, device=device)
    return gaug, qkv, x, weight


def _attend(case, hw, impl, dtype, heads, device, flex_eager):
    """Output and gradients of one kernel under one autocast dtype."""
    gaug, qkv, x, weight = case
    x = x.clone().requires_grad_()
    for module in (gaug, qkv):
        module.zero_grad(set_to_none=True)
    kernel = _eager_flex_dispatch if flex_eager else gaug_attention
    # FlexAttention has no CPU backward: forward only there.
    needs_grad = not (impl == 'flex' and device.type == 'cpu')
    with torch.autocast(device.type, dtype=dtype or torch.float32,
                        enabled=dtype is not None), \
            torch.set_grad_enabled(needs_grad):
        b, n, c = x.shape
        q, k, v = qkv(x).reshape(b, n, 3, heads,
                                 c // heads).permute(2, 0, 3, 1, 4).unbind(0)
        out = kernel(q, k, v, gaug, hw, impl=impl)
    if not needs_grad:
        return [out.detach().float()], False
    (out.float() * weight).sum().backward()
    grads = [x.grad, qkv.weight.grad] + [p.grad for p in gaug.parameters()]
    return [out.detach().float()] + [g.float() for g in grads], True


def _eager_flex_dispatch(q, k, v, gaug, hw, impl):
    if impl != 'flex':
        return gaug_attention(q, k, v, gaug, hw, impl=impl)
    with torch.no_grad():
        var, alpha = gaug(q, hw, return_factors=True)
        return gaug_flex.flex_gaug_attention(
            q,
            k,
            v,
            var,
            alpha,
            hw,
            gaug.eps,
            gaug.clamp_value(),
            gaug.num_prefix_tokens,
            compiled=False)


def _errors(got: List[torch.Tensor], ref: List[torch.Tensor]) -> tuple:
    rel = [((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()
           for a, b in zip(got, ref)]
    return rel[0], (max(rel[1:]) if len(rel) > 1 else None)


def check_exactness(table: Table, cfg: dict, device: torch.device, quick: bool,
                    deadline: float) -> None:
    for size in cfg['exact_sizes']:
        hw = _grid(size)
        batch = 1 if hw[0] * hw[1] > 2048 else 2
        for regs in (0, 4):
            case = _attention_case(hw, regs, cfg['heads'], cfg['head_dims'],
                                   device, batch)
            attend = partial(
                _attend,
                case,
                hw,
                heads=cfg['heads'],
                device=device,
                flex_eager=quick)
            ref, _ = attend('dense', None)
            label = dict(check='exact', size=f'{size[0]}x{size[1]}', regs=regs)
            for name, dtype in DTYPES.items():
                base = None
                for impl in ('dense', 'chunked', 'flex'):
                    if time.perf_counter() > deadline:
                        table.row(
                            **label,
                            dtype=name,
                            impl=impl,
                            note='skipped: time budget')
                        continue
                    before = flex_compile_stats()
                    try:
                        got, with_grad = attend(impl, dtype)
                    except torch.OutOfMemoryError:
                        table.row(
                            **label,
                            dtype=name,
                            impl=impl,
                            ok='FAIL',
                            note='out of memory')
                        continue
                    after = flex_compile_stats()
                    fwd, bwd = _errors(got, ref)
                    worst = max(fwd, bwd or 0.)
                    if impl == 'dense':
                        base = worst
                    tol = FP32_TOL if dtype is None else max(
                        DENSE_FACTOR * base, LOW_TOL[name])
                    compiles = after['compiled'] - before['compiled']
                    failed = after['failed'] - before['failed']
                    table.row(
                        **label,
                        dtype=name,
                        impl=impl,
                        fwd=fwd,
                        bwd=bwd if with_grad else 'n/a',
                        ok='ok' if worst <= tol else 'FAIL',
                        compiles=('fallback' if failed else
                                  compiles if impl == 'flex' else ''),
                        note='' if with_grad else 'no CPU backward')


def _jobs(cfg: dict, device: str, mode: str, size: int, batch: int,
          quick: bool) -> Dict[str, dict]:
    job = dict(
        mode=mode,
        arch=cfg['arch'],
        size=size,
        batch=batch,
        iters=cfg['iters'],
        warmup=cfg['warmup'],
        device=device,
        amp=True,
        amp_dtype='bf16',
        clock='wall')
    jobs = dict(vit=dict(job, model='vit', sdpa='flash'))
    for impl in ('flex', 'chunked', 'dense'):
        jobs[impl] = dict(job, model='locat', impl=impl)
    if device == 'cpu':  # flash is a CUDA kernel; no CPU flex backward
        jobs['vit'].pop('sdpa')
        if mode == 'train' or quick:  # quick: no CPU compile (~10 s)
            jobs.pop('flex')
    return jobs


def check_cost(table: Table, cfg: dict, device: torch.device, mode: str,
               quick: bool, deadline: float) -> None:
    on_cpu = device.type == 'cpu'
    for size, batch in cfg[mode]:
        vit = None
        for name, job in _jobs(cfg, device.type, mode, size, batch,
                               quick).items():
            label = dict(
                check=mode,
                size=f'{size}x{size}',
                regs=0,
                dtype='bf16',
                impl=name)
            if time.perf_counter() > deadline:
                table.row(**label, note='skipped: time budget')
                continue
            before = flex_compile_stats()
            try:
                res = run_job(job)
            except torch.OutOfMemoryError:
                table.row(**label, note=f'out of memory (batch {batch})')
                continue
            finally:
                if device.type == 'cuda':
                    torch.cuda.empty_cache()
            after = flex_compile_stats()
            if name == 'vit':
                vit = res
            mb = None if on_cpu else res['peak_mb']
            ratio = {}
            if vit is not None:
                ratio['x_time'] = res['ms'] / max(vit['ms'], 1e-9)
                if mb is not None:
                    ratio['x_MB'] = mb / max(vit['peak_mb'], 1e-9)
            failed = after['failed'] - before['failed']
            table.row(
                **label,
                ms=res['ms'],
                MB=mb if mb is not None else 'n/a',
                **ratio,
                compiles=('fallback' if failed else after['compiled'] -
                          before['compiled'] if name == 'flex' else ''),
                note=f'batch {batch}' +
                ('' if name != 'vit' else
                 ', SDPA flash' if not on_cpu else ', SDPA'))


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    device = torch.device(args.device)
    cfg = QUICK if args.quick else FULL
    # Every exact shape x dtype plus the model shapes is its own key.
    set_flex_compile_budget(64)
    start = time.perf_counter()
    deadline = start + args.time_budget
    name = torch.cuda.get_device_name(device) if device.type == 'cuda' \
        else 'cpu'
    print(f'gpu_check: {name}, torch {torch.__version__}, '
          f'{"quick" if args.quick else "full"}; errors relative to the '
          'float32 dense reference; time per step (wall, median of '
          f'{cfg["iters"]} after {cfg["warmup"]} warm-up), peak memory '
          'growth in MB; x = ratio to the plain ViT')
    table = Table()
    if 'exact' in args.sections:
        check_exactness(table, cfg, device, args.quick, deadline)
    for mode in ('train', 'infer'):
        if mode in args.sections:
            check_cost(table, cfg, device, mode, args.quick, deadline)
    stats = flex_compile_stats()
    print(f'flex compilations: {stats["compiled"]}, failed: '
          f'{stats["failed"]}; {table.failed} failing rows; '
          f'{time.perf_counter() - start:.0f} s')
    return 1 if table.failed else 0


if __name__ == '__main__':
    sys.exit(main())
