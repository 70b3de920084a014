"""Prove that the installed OpenMMLab stack works for mmlocat.

Imports the three hosts' model packages and runs real compiled ``mmcv.ops``
(``nms`` and ``RoIAlign``) on CPU. Exits non-zero with the failing check.
"""
import importlib
import sys


def main() -> int:
    import torch
    versions = {'torch': torch.__version__}
    for name in ('mmengine', 'mmcv', 'mmseg', 'mmdet', 'mmpretrain'):
        versions[name] = importlib.import_module(name).__version__
    for name in ('mmseg.models', 'mmdet.models', 'mmpretrain.models',
                 'mmlocat'):
        importlib.import_module(name)

    from mmcv.ops import RoIAlign, nms
    boxes = torch.tensor([[0., 0., 10., 10.], [1., 1., 11., 11.],
                          [20., 20., 30., 30.]])
    scores = torch.tensor([0.9, 0.8, 0.7])
    _, keep = nms(boxes, scores, iou_threshold=0.5)
    if keep.tolist() != [0, 2]:
        raise RuntimeError(f'mmcv.ops.nms kept {keep.tolist()}, '
                           'expected [0, 2]')
    feats = torch.arange(16.).reshape(1, 1, 4, 4)
    rois = torch.tensor([[0., 0., 0., 4., 4.]])
    pooled = RoIAlign((2, 2),
                      spatial_scale=1.0,
                      sampling_ratio=2,
                      aligned=False)(feats, rois)
    if pooled.shape != (1, 1, 2, 2) or not torch.isfinite(pooled).all():
        raise RuntimeError(f'mmcv.ops.RoIAlign returned {pooled}')
    print('stack OK: ' + ', '.join(f'{k} {v}' for k, v in versions.items()))
    return 0


if __name__ == '__main__':
    sys.exit(main())
