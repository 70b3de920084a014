"""Time a train step and measure peak memory of LocAtViT vs the plain ViT.

Both models have the same arch; the ViT is LocAtViT with ``gaug=False,
prr=False``. Every measurement runs in a fresh subprocess (see
``bench_utils.py`` for how peak memory is measured on CUDA and CPU). For
the side-by-side comparison of the GAug kernels (dense bias vs the fast
paths, inference and training) use ``benchmark_gaug.py``.

Example::

    python tools/analysis_tools/benchmark_locat.py --arch t \
        --sizes 224 512 1024 --batch 8 --iters 5 --device cuda
"""
import argparse

from bench_utils import add_step_args, measure


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--arch', default='t', help='LocAtViT arch')
    parser.add_argument(
        '--sizes', type=int, nargs='+', default=[224, 512, 1024])
    add_step_args(parser, batch=8, iters=5)
    parser.add_argument(
        '--gaug-impl',
        default='auto',
        choices=['auto', 'dense', 'chunked', 'flex'],
        help='GAug kernel of the LocAtViT')
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    mem = 'peak alloc MB' if args.device.startswith('cuda') else \
        'max-RSS growth MB'
    print(f'arch={args.arch} batch={args.batch} iters={args.iters} '
          f'device={args.device} amp={args.amp} gaug_impl={args.gaug_impl}; '
          f'train step = fwd+bwd; memory = {mem}')
    header = (f'{"size":>6} | {"ViT ms":>9} | {"LocAt ms":>9} | '
              f'{"x":>5} | {"ViT MB":>9} | {"LocAt MB":>9} | {"x":>5}')
    print(header)
    print('-' * len(header))
    for size in args.sizes:
        job = dict(
            impl=args.gaug_impl,
            mode='train',
            arch=args.arch,
            size=size,
            batch=args.batch,
            iters=args.iters,
            warmup=args.warmup,
            device=args.device,
            amp=args.amp)
        vit, locat = (measure(dict(job, model=m)) for m in ('vit', 'locat'))
        if 'error' in vit or 'error' in locat:
            print(f'{size:>6} | failed: {vit.get("error") or locat["error"]}')
            continue
        print(f'{size:>6} | {vit["ms"]:9.1f} | {locat["ms"]:9.1f} | '
              f'{locat["ms"] / vit["ms"]:5.2f} | {vit["peak_mb"]:9.1f} | '
              f'{locat["peak_mb"]:9.1f} | '
              f'{locat["peak_mb"] / max(vit["peak_mb"], 1e-9):5.2f}')


if __name__ == '__main__':
    main()
