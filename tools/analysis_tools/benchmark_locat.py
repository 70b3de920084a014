"""Time a train step and measure peak memory of LocAtViT vs the plain ViT.

Both models have the same arch; the ViT is LocAtViT with ``gaug=False,
prr=False``. Every measurement runs in a fresh subprocess so peak memory is
not polluted by the previous one: on CUDA it is
``torch.cuda.max_memory_allocated`` over the steps, on CPU the growth of the
process's maximum resident set size (``resource.getrusage``) during them.

Example::

    python tools/analysis_tools/benchmark_locat.py --arch t \
        --sizes 224 512 1024 --batch 8 --iters 5 --device cuda
"""
import argparse
import json
import resource
import statistics
import subprocess
import sys
import time


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--arch', default='t', help='LocAtViT arch')
    parser.add_argument(
        '--sizes', type=int, nargs='+', default=[224, 512, 1024])
    parser.add_argument('--batch', type=int, default=8)
    parser.add_argument('--iters', type=int, default=5)
    parser.add_argument('--warmup', type=int, default=1)
    parser.add_argument('--device', default='cpu')
    parser.add_argument(
        '--amp', action='store_true', help='autocast (fp16 CUDA, bf16 CPU)')
    parser.add_argument(
        '--worker', choices=['locat', 'vit'], help=argparse.SUPPRESS)
    parser.add_argument('--size', type=int, help=argparse.SUPPRESS)
    return parser.parse_args()


def run_worker(args: argparse.Namespace) -> dict:
    """One measurement: build, warm up, time ``iters`` fwd+bwd steps."""
    import torch

    from mmlocat.models.backbones import LocAtViT
    device = torch.device(args.device)
    locat = args.worker == 'locat'
    model = LocAtViT(
        args.arch, img_size=args.size, gaug=locat, prr=locat).to(device)
    model.train()
    x = torch.randn(args.batch, 3, args.size, args.size, device=device)
    amp_dtype = torch.float16 if device.type == 'cuda' else torch.bfloat16

    def step() -> None:
        with torch.autocast(device.type, dtype=amp_dtype, enabled=args.amp):
            out = model(x)[0]
        out.float().pow(2).mean().backward()
        model.zero_grad(set_to_none=True)

    def sync() -> None:
        if device.type == 'cuda':
            torch.cuda.synchronize(device)

    # CPU: the max-RSS baseline is taken before the first step, since the
    # warm-up step already reaches the peak a timed step would reach.
    rss_base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    for _ in range(args.warmup):
        step()
    sync()
    if device.type == 'cuda':
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
    times = []
    for _ in range(args.iters):
        start = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - start)
    if device.type == 'cuda':
        peak = torch.cuda.max_memory_allocated(device) - base
    else:
        peak = resource.getrusage(
            resource.RUSAGE_SELF).ru_maxrss * 1024 - rss_base
    return dict(ms=1e3 * statistics.median(times), peak_mb=peak / 2**20)


def measure(args: argparse.Namespace, kind: str, size: int) -> dict:
    cmd = [
        sys.executable, __file__, '--worker', kind, '--size',
        str(size), '--arch', args.arch, '--batch',
        str(args.batch), '--iters',
        str(args.iters), '--warmup',
        str(args.warmup), '--device', args.device
    ] + (['--amp'] if args.amp else [])
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return dict(error=proc.stderr.strip().splitlines()[-1][:60])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    args = parse_args()
    if args.worker:
        print(json.dumps(run_worker(args)))
        return
    mem = 'peak alloc MB' if args.device.startswith('cuda') else \
        'max-RSS growth MB'
    print(f'arch={args.arch} batch={args.batch} iters={args.iters} '
          f'device={args.device} amp={args.amp}; train step = fwd+bwd; '
          f'memory = {mem}')
    header = (f'{"size":>6} | {"ViT ms":>9} | {"LocAt ms":>9} | '
              f'{"x":>5} | {"ViT MB":>9} | {"LocAt MB":>9} | {"x":>5}')
    print(header)
    print('-' * len(header))
    for size in args.sizes:
        vit, locat = (measure(args, kind, size) for kind in ('vit', 'locat'))
        if 'error' in vit or 'error' in locat:
            print(f'{size:>6} | failed: {vit.get("error") or locat["error"]}')
            continue
        print(f'{size:>6} | {vit["ms"]:9.1f} | {locat["ms"]:9.1f} | '
              f'{locat["ms"] / vit["ms"]:5.2f} | {vit["peak_mb"]:9.1f} | '
              f'{locat["peak_mb"]:9.1f} | '
              f'{locat["peak_mb"] / max(vit["peak_mb"], 1e-9):5.2f}')


if __name__ == '__main__':
    main()
