"""Resize that also maps ``gt_bboxes``, for the PiB / CorLoc pipelines.

mmpretrain's ``ResizeEdge`` (short side to 256, like torchvision's
``Resize(256)``) leaves boxes alone, while mmcv's ``CenterCrop`` already
shifts and clips ``gt_bboxes``. :class:`ResizeEdgeWithBoxes` is
``ResizeEdge`` plus the box rescale, so the PiB protocol of "Vision
Transformers Need More Than Registers" (https://arxiv.org/abs/2602.22394),
Resize(256) + CenterCrop(224) with the box mapped through both, is
``ResizeEdgeWithBoxes(256) -> CenterCrop(224)``. :class:`KeepOriginalBoxes`
keeps the unmapped boxes for metrics that map them themselves (the public
PiB protocol).
"""
import numpy as np
from mmcv.transforms import BaseTransform
from mmpretrain.datasets.transforms import ResizeEdge

from mmlocat.registry import TRANSFORMS

__all__ = ['ResizeEdgeWithBoxes', 'KeepOriginalBoxes']


@TRANSFORMS.register_module()
class ResizeEdgeWithBoxes(ResizeEdge):
    """mmpretrain ``ResizeEdge`` that rescales ``gt_bboxes`` too.

    **Modified keys:** ``img``, ``img_shape``, ``gt_bboxes`` (``(n, 4)``
    ``x1, y1, x2, y2``, multiplied by the recorded ``scale_factor``).
    **Added keys:** ``scale``, ``scale_factor`` (as ``ResizeEdge``).

    Args: as mmpretrain's ``ResizeEdge`` (``scale``, ``edge``, ``backend``,
    ``interpolation``). ``backend='pillow'`` with ``'bilinear'`` matches the
    torchvision / PIL evaluation of the public code most closely.
    """

    def transform(self, results: dict) -> dict:
        """Resize the image, then scale the boxes by the same factors."""
        results = super().transform(results)
        if 'gt_bboxes' in results:
            boxes = np.asarray(results['gt_bboxes'], dtype=np.float32)
            if boxes.size and (boxes.ndim != 2 or boxes.shape[1] != 4):
                raise ValueError('gt_bboxes must have shape (n, 4), got '
                                 f'{boxes.shape}')
            w_scale, h_scale = results['scale_factor']
            factors = np.array([w_scale, h_scale, w_scale, h_scale],
                               dtype=np.float32)
            results['gt_bboxes'] = boxes.reshape(-1, 4) * factors
        return results


@TRANSFORMS.register_module()
class KeepOriginalBoxes(BaseTransform):
    """Copy ``gt_bboxes`` to ``ori_gt_bboxes`` before any geometric step.

    Put it first in the pipeline and pack ``ori_gt_bboxes`` with
    ``PackInputs(algorithm_keys=(..., 'ori_gt_bboxes'))``; resizes and crops
    change ``gt_bboxes`` only.

    **Added keys:** ``ori_gt_bboxes`` (a copy of ``gt_bboxes``).
    """

    def transform(self, results: dict) -> dict:
        """Add the copy."""
        if 'gt_bboxes' not in results:
            raise KeyError('KeepOriginalBoxes needs gt_bboxes in the results '
                           f'(got {sorted(results)}); use a dataset with '
                           'boxes, e.g. mmlocat.ImageNetLocDataset')
        results['ori_gt_bboxes'] = np.array(results['gt_bboxes'], copy=True)
        return results

    def __repr__(self) -> str:
        return f'{type(self).__name__}()'
