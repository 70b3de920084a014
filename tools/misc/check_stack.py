"""Prove that the installed OpenMMLab stack works for mmlocat.

Imports the three hosts' model packages and runs real compiled ``mmcv.ops``
(``nms`` and ``RoIAlign``) on CPU and, when a GPU is visible, on CUDA
tensors. Exits non-zero with the failing check; says clearly when mmcv was
compiled without its CUDA ops.

Usage: python tools/misc/check_stack.py [--expect-cuda] [--no-cuda]
"""
import argparse
import importlib
import sys

REBUILD = ('rebuild it with CUDA ops: MMLOCAT_MMCV=cuda bash '
           'tools/setup_env.sh (needs the CUDA toolkit matching torch)')


def mmcv_cuda_version() -> str:
    """CUDA version mmcv's ops were compiled with, or 'not available'."""
    from mmcv.ops import get_compiling_cuda_version
    return get_compiling_cuda_version()


def check_ops(device: str) -> None:
    """Run ``nms`` and ``RoIAlign`` on ``device`` and check their output."""
    import torch
    from mmcv.ops import RoIAlign, nms
    boxes = torch.tensor(
        [[0., 0., 10., 10.], [1., 1., 11., 11.], [20., 20., 30., 30.]],
        device=device)
    scores = torch.tensor([0.9, 0.8, 0.7], device=device)
    _, keep = nms(boxes, scores, iou_threshold=0.5)
    if keep.cpu().tolist() != [0, 2]:
        raise RuntimeError(f'mmcv.ops.nms on {device} kept '
                           f'{keep.tolist()}, expected [0, 2]')
    feats = torch.arange(16., device=device).reshape(1, 1, 4, 4)
    rois = torch.tensor([[0., 0., 0., 4., 4.]], device=device)
    pooled = RoIAlign((2, 2),
                      spatial_scale=1.0,
                      sampling_ratio=2,
                      aligned=False)(feats, rois)
    if pooled.shape != (1, 1, 2, 2) or not torch.isfinite(pooled).all():
        raise RuntimeError(f'mmcv.ops.RoIAlign on {device} returned {pooled}')


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        '--expect-cuda',
        action='store_true',
        help='fail unless mmcv was compiled with its CUDA ops')
    parser.add_argument(
        '--no-cuda',
        action='store_true',
        help='check the CPU ops only, even when a GPU is visible')
    args = parser.parse_args(argv)

    import torch
    versions = {'torch': torch.__version__}
    for name in ('mmengine', 'mmcv', 'mmseg', 'mmdet', 'mmpretrain'):
        versions[name] = importlib.import_module(name).__version__
    for name in ('mmseg.models', 'mmdet.models', 'mmpretrain.models',
                 'mmlocat'):
        importlib.import_module(name)

    check_ops('cpu')
    devices = ['cpu']
    ops_cuda = mmcv_cuda_version()
    has_cuda_ops = ops_cuda != 'not available'
    if args.expect_cuda and not has_cuda_ops:
        raise RuntimeError(f'mmcv {versions["mmcv"]} was compiled without '
                           f'CUDA ops; {REBUILD}')
    if torch.cuda.is_available() and not args.no_cuda:
        if not has_cuda_ops:
            raise RuntimeError(
                f'a GPU is visible but mmcv {versions["mmcv"]} was compiled '
                'without CUDA ops, so mmdet\'s nms / RoIAlign cannot run on '
                f'CUDA tensors; {REBUILD} (or --no-cuda to check CPU only)')
        check_ops('cuda')
        devices.append('cuda')
    versions['mmcv ops'] = ('CUDA ' + ops_cuda) if has_cuda_ops else 'CPU'
    print('stack OK: ' + ', '.join(f'{k} {v}' for k, v in versions.items()) +
          f'; mmcv.ops nms and RoIAlign ran on {" and ".join(devices)}')
    return 0


if __name__ == '__main__':
    try:
        sys.exit(main())
    except (ImportError, RuntimeError) as err:
        sys.exit(f'check_stack: FAILED: {err}')
