"""Side by side: plain ViT, LocAtViT with the dense GAug bias, LocAtViT
with the fast GAug kernel; inference and a train step.

For every arch, size and mode one row: the median step time and the peak
memory of the three models, and their ratios to the plain ViT (the ViT is
LocAtViT with ``gaug=False, prr=False``, same arch). Each measurement runs
in a fresh subprocess; peak memory is ``max_memory_allocated`` growth on
CUDA and the growth of the process's max resident set size on CPU (see
``bench_utils.py``). 'fast' is ``--fast-impl`` ('auto' by default: the
kernel LocAtViT picks for the device and grad mode; the column ``impl``
says which it was).

Example (docs/benchmarks.md's "GAug cost" table; one thread and process CPU
time, best of interleaved rounds, which is what stays stable on a shared
machine)::

    OMP_NUM_THREADS=1 python tools/analysis_tools/benchmark_gaug.py \
        --archs t b --sizes 1024 --train-sizes 512 --threads 1 \
        --clock cpu --iters 2 --stat min --rounds 2 --skip-dense
"""
import argparse
import math
from typing import List, Optional

from bench_utils import measure

MODELS = (('vit', 'auto'), ('locat', 'dense'), ('locat', None))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--archs', nargs='+', default=['t', 'b'])
    parser.add_argument(
        '--sizes',
        type=int,
        nargs='+',
        default=[224, 512, 1024],
        help='input sizes of the inference rows')
    parser.add_argument(
        '--train-sizes',
        type=int,
        nargs='*',
        default=None,
        help='input sizes of the train-step rows (default: --sizes)')
    parser.add_argument('--modes', nargs='+', default=['infer', 'train'])
    parser.add_argument('--batch', type=int, default=1)
    parser.add_argument('--train-batch', type=int, default=2)
    parser.add_argument('--iters', type=int, default=3)
    parser.add_argument('--warmup', type=int, default=1)
    parser.add_argument('--device', default='cpu')
    parser.add_argument(
        '--threads', type=int, default=0, help='torch threads (0: default)')
    parser.add_argument(
        '--clock',
        default='wall',
        choices=['wall', 'cpu'],
        help='cpu: process CPU time, robust on a shared machine (use with '
        '--threads 1)')
    parser.add_argument(
        '--rounds',
        type=int,
        default=1,
        help='measure the three models this many times, interleaved, and '
        'keep the best time and memory of each')
    parser.add_argument(
        '--stat',
        default='median',
        choices=['median', 'min'],
        help='statistic of the timed iterations (min: robust when other '
        'processes share the cores)')
    parser.add_argument(
        '--fast-impl',
        default='auto',
        choices=['auto', 'chunked', 'flex'],
        help='the GAug kernel of the "fast" column')
    parser.add_argument(
        '--amp', action='store_true', help='autocast (fp16 CUDA, bf16 CPU)')
    parser.add_argument(
        '--skip-dense',
        action='store_true',
        help='leave out the dense-bias column (the slowest by far on CPU)')
    return parser.parse_args()


def _ratio(value: float, base: float) -> str:
    return f'{value / max(base, 1e-9):5.2f}'


def row(args: argparse.Namespace, arch: str, mode: str,
        size: int) -> Optional[str]:
    results: List[dict] = [{} for _ in MODELS]
    # Rounds interleave the three models, so slow drifts of a shared
    # machine hit all of them; the best round of each is kept.
    for _ in range(args.rounds):
        for best, (model, impl) in zip(results, MODELS):
            if args.skip_dense and impl == 'dense':
                best.update(ms=math.nan, peak_mb=math.nan)
                continue
            job = dict(
                model=model,
                impl=impl or args.fast_impl,
                mode=mode,
                arch=arch,
                size=size,
                batch=args.train_batch if mode == 'train' else args.batch,
                iters=args.iters,
                warmup=args.warmup,
                device=args.device,
                threads=args.threads,
                clock=args.clock,
                amp=args.amp)
            res = measure(job)
            if 'error' in res:
                return (f'{arch:>4} {mode:>5} {size:>5} | {model}/'
                        f'{job["impl"]} failed: {res["error"]}')
            res['ms'] = res['ms' if args.stat == 'median' else 'ms_min']
            for key in ('ms', 'peak_mb'):
                best[key] = min(best.get(key, math.inf), res[key])
            best['impl'] = res['impl']
    vit, dense, fast = results
    return (f'{arch:>4} {mode:>5} {size:>5} | {vit["ms"]:8.1f} '
            f'{dense["ms"]:8.1f} {fast["ms"]:8.1f} | '
            f'{_ratio(dense["ms"], vit["ms"])} '
            f'{_ratio(fast["ms"], vit["ms"])} | {vit["peak_mb"]:7.1f} '
            f'{dense["peak_mb"]:7.1f} {fast["peak_mb"]:7.1f} | '
            f'{_ratio(dense["peak_mb"], vit["peak_mb"])} '
            f'{_ratio(fast["peak_mb"], vit["peak_mb"])} | {fast["impl"]}')


def main() -> None:
    args = parse_args()
    train_sizes = args.sizes if args.train_sizes is None else \
        args.train_sizes
    mem = 'peak alloc growth' if args.device.startswith('cuda') else \
        'max-RSS growth'
    print(f'device={args.device} amp={args.amp} batch={args.batch} '
          f'(train {args.train_batch}) threads={args.threads or "default"} '
          f'clock={args.clock} iters={args.iters} ({args.stat}) '
          f'rounds={args.rounds} (best) '
          f'warmup={args.warmup}; train = fwd+bwd; memory = {mem} in MB; '
          f'x = ratio to the plain ViT')
    header = (f'{"arch":>4} {"mode":>5} {"size":>5} | {"ViT ms":>8} '
              f'{"dense":>8} {"fast":>8} | {"dense":>5} {"fast":>5} | '
              f'{"ViT MB":>7} {"dense":>7} {"fast":>7} | {"dense":>5} '
              f'{"fast":>5} | impl')
    print(header)
    print('-' * len(header))
    for arch in args.archs:
        for mode in args.modes:
            for size in (train_sizes if mode == 'train' else args.sizes):
                print(row(args, arch, mode, size), flush=True)


if __name__ == '__main__':
    main()
