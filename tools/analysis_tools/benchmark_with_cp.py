"""Peak memory and time of a train step with and without ``with_cp``.

``with_cp=True`` checkpoints every block of mmlocat's ViT backbones
(``TokenLoopViT.run_block``: the blocks' inputs are kept, the rest is
recomputed in the backward). Each backbone is built at random init with the
same arch twice, once with and once without it, and one train step
(forward + backward of ``mean(out ** 2)``) is measured in a fresh
subprocess (``bench_utils.py``: the growth of the process's max RSS on CPU,
``torch.cuda.max_memory_allocated`` on CUDA).

Example (the numbers of configs/last/README.md)::

    OMP_NUM_THREADS=1 python tools/analysis_tools/benchmark_with_cp.py \
        --backbones CLIPViT EVA02CLIPViT --arch l --patch-size 14 \
        --size 224 --batch 4 --threads 1
"""
import argparse

from bench_utils import add_step_args, measure

BACKBONES = ('LocAtViT', 'LaStViT', 'CLIPViT', 'EVA02CLIPViT')


def backbone_cfg(name: str, arch: str, size: int, patch_size: int,
                 with_cp: bool) -> dict:
    """The backbone config of one measurement (global-token output where
    the backbone has one, as the contrastive recipes train them)."""
    cfg = dict(
        type=f'mmlocat.{name}',
        arch=arch,
        img_size=size,
        patch_size=patch_size,
        with_cp=with_cp)
    if name == 'LocAtViT':
        return cfg
    cfg.update(out_type='cls_token', topk=None, topk_ratio=0.5)
    if name == 'CLIPViT':
        cfg['act'] = 'quick_gelu'
    return cfg


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument(
        '--backbones', nargs='+', choices=BACKBONES, default=list(BACKBONES))
    parser.add_argument('--arch', default='b', help="arch alias ('b', 'l')")
    parser.add_argument('--patch-size', type=int, default=16)
    parser.add_argument('--size', type=int, default=224)
    add_step_args(parser, batch=4, iters=1)
    parser.add_argument(
        '--threads', type=int, default=0, help='torch threads (0: default)')
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    mem = 'peak alloc MB' if args.device.startswith('cuda') else \
        'max-RSS growth MB'
    print(f'arch={args.arch} patch={args.patch_size} size={args.size} '
          f'batch={args.batch} device={args.device} amp={args.amp}; '
          f'train step = fwd+bwd; memory = {mem}')
    header = (f'{"backbone":>13} | {"ms":>9} | {"cp ms":>9} | '
              f'{"MB":>9} | {"cp MB":>9} | {"cp/no":>5}')
    print(header)
    print('-' * len(header))
    for name in args.backbones:
        job = dict(
            model='config',
            mode='train',
            size=args.size,
            batch=args.batch,
            iters=args.iters,
            warmup=args.warmup,
            device=args.device,
            amp=args.amp,
            threads=args.threads)
        plain, ckpt = (
            measure(
                dict(
                    job,
                    backbone=backbone_cfg(name, args.arch, args.size,
                                          args.patch_size, cp)))
            for cp in (False, True))
        if 'error' in plain or 'error' in ckpt:
            print(f'{name:>13} | failed: '
                  f'{plain.get("error") or ckpt["error"]}')
            continue
        print(f'{name:>13} | {plain["ms"]:9.1f} | {ckpt["ms"]:9.1f} | '
              f'{plain["peak_mb"]:9.1f} | {ckpt["peak_mb"]:9.1f} | '
              f'{ckpt["peak_mb"] / max(plain["peak_mb"], 1e-9):5.2f}')


if __name__ == '__main__':
    main()
