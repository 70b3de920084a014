"""Shared checks for the localisation metrics (PiB, CorLoc).

The metrics read a per-image patch-score map ``(h, w)`` and ground-truth
boxes ``(n, 4)`` in ``x1, y1, x2, y2`` pixel-edge coordinates of the network
input (the boxes follow the pipeline's resize / crop). These helpers turn
whatever the data samples hold (tensors, arrays, lists) into validated numpy
arrays and fail loudly on malformed input instead of scoring garbage.
"""
from typing import Any, Mapping, Optional, Sequence, Tuple

import numpy as np
import torch
from mmengine.evaluator import BaseMetric

__all__ = [
    'to_score_map', 'to_boxes', 'check_score_grid', 'get_field', 'box_iou'
]


def get_field(data_sample: Mapping, key: str, metric: str) -> Any:
    """Read ``key`` from a data sample dict with a helpful error."""
    if key not in data_sample:
        raise KeyError(
            f'{metric} needs the field {key!r} in every data sample but got '
            f'only {sorted(data_sample.keys())}. Use a model that attaches '
            'patch scores (e.g. mmlocat.PatchScoreClassifier) and a pipeline '
            "that packs the boxes (PackInputs(algorithm_keys=('gt_bboxes',)))")
    return data_sample[key]


def _to_numpy(value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        value = value.detach().float().cpu().numpy()
    return np.asarray(value, dtype=np.float64)


def to_score_map(value: Any, name: str = 'patch_score') -> np.ndarray:
    """Validate a score map and return it as a float64 ``(h, w)`` array.

    Leading singleton dimensions (e.g. ``(1, h, w)``) are squeezed.

    Raises:
        ValueError: If the map is not 2-D, is empty or holds NaN / inf.
    """
    arr = _to_numpy(value)
    while arr.ndim > 2 and arr.shape[0] == 1:
        arr = arr[0]
    if arr.ndim != 2 or arr.size == 0:
        raise ValueError(f'{name} must be a non-empty (h, w) map, got shape '
                         f'{tuple(arr.shape)}')
    if not np.isfinite(arr).all():
        raise ValueError(f'{name} contains NaN or inf values')
    return arr


def to_boxes(value: Any, name: str = 'gt_bboxes') -> np.ndarray:
    """Validate boxes and return them as a float64 ``(n, 4)`` array.

    Raises:
        ValueError: On a wrong shape, NaN / inf or ``x2 < x1`` / ``y2 < y1``.
    """
    arr = _to_numpy(value)
    if arr.size == 0:
        return np.zeros((0, 4))
    if arr.ndim == 1 and arr.size == 4:
        arr = arr[None]
    if arr.ndim != 2 or arr.shape[1] != 4:
        raise ValueError(f'{name} must have shape (n, 4) as x1, y1, x2, y2, '
                         f'got {tuple(arr.shape)}')
    if not np.isfinite(arr).all():
        raise ValueError(f'{name} contains NaN or inf values')
    if (arr[:, 2] < arr[:, 0]).any() or (arr[:, 3] < arr[:, 1]).any():
        raise ValueError(f'{name} must be x1, y1, x2, y2 with x2 >= x1 and '
                         f'y2 >= y1, got {arr.tolist()}')
    return arr


def check_score_grid(score_shape: Tuple[int, int],
                     img_shape: Optional[Sequence[int]],
                     patch_size: int) -> None:
    """Check that a score map is the patch grid of the network input.

    A grid side may be ``floor`` (a plain strided patch conv) or ``ceil``
    (adaptive padding) of the input side over ``patch_size``. A mismatch
    usually means a wrong ``patch_size`` in the metric config.

    Raises:
        ValueError: If the grid does not match the input size.
    """
    if img_shape is None:
        return
    for side, grid, axis in zip(img_shape[:2], score_shape, ('h', 'w')):
        side = int(side)
        if grid not in (side // patch_size, -(-side // patch_size)):
            raise ValueError(
                f'score map {tuple(score_shape)} is not the patch grid of an '
                f'input of shape {tuple(img_shape[:2])} with patch_size='
                f'{patch_size} (axis {axis}); check the metric patch_size')


def box_iou(box: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """IoU of one ``(4,)`` box with ``(n, 4)`` boxes (continuous areas)."""
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    iw = np.clip(
        np.minimum(box[2], boxes[:, 2]) - np.maximum(box[0], boxes[:, 0]), 0,
        None)
    ih = np.clip(
        np.minimum(box[3], boxes[:, 3]) - np.maximum(box[1], boxes[:, 1]), 0,
        None)
    inter = iw * ih
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    union = area + areas - inter
    return np.where(union > 0, inter / np.maximum(union, 1e-12), 0.0)


class ScoreMapMetric(BaseMetric):
    """Base of the metrics that read a patch-score map and GT boxes.

    Args:
        patch_size: Side of one score-map cell in input pixels.
        score_key: Data-sample field holding the (h, w) score map.
        box_key: Data-sample field holding the (K, 4) GT boxes.
        collect_device, prefix, collect_dir: As :class:`BaseMetric`.
    """

    def __init__(self,
                 patch_size: int = 16,
                 score_key: str = 'patch_score',
                 box_key: str = 'gt_bboxes',
                 collect_device: str = 'cpu',
                 prefix: Optional[str] = None,
                 collect_dir: Optional[str] = None) -> None:
        super().__init__(
            collect_device=collect_device,
            prefix=prefix,
            collect_dir=collect_dir)
        if int(patch_size) != patch_size or patch_size <= 0:
            raise ValueError(
                f'patch_size must be a positive int, got {patch_size}')
        self.patch_size = int(patch_size)
        self.score_key = score_key
        self.box_key = box_key
