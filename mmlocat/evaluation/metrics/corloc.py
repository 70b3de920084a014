"""CorLoc of boxes discovered from patch-score maps (object discovery).

From "Vision Transformers Need More Than Registers" (Shi et al., CVPR 2026,
https://arxiv.org/abs/2602.22394): foreground is ``s > mean(s) + std(s)``
per image and CorLoc is the fraction of images whose predicted box has
IoU >= 0.5 with some ground-truth box. The paper does not say how a box is
taken from the mask; here it is the tight box of the largest connected
component (``scipy.ndimage.label``), as in LOST's seed-expansion protocol.

Throughput (images/s, Tab. 7's speed column) is the evaluator's own wall
clock: the images after the first batch over the time from the first to
the last ``process`` call, per rank, summed over ranks. It covers data
loading, the model and the box search of the test loop, not the model
alone.
"""
import time
from typing import List, Optional, Sequence

import numpy as np
from mmengine.dist import get_rank
from scipy import ndimage

from mmlocat.registry import METRICS
from .loc_utils import (ScoreMapMetric, box_iou, check_score_grid, get_field,
                        to_boxes, to_score_map)

__all__ = [
    'foreground_mask', 'largest_component_box', 'images_per_second', 'CorLoc'
]


def foreground_mask(score_map: np.ndarray) -> np.ndarray:
    """Foreground cells ``s > mean(s) + std(s)`` (population std, ddof 0).

    A constant map has no foreground.
    """
    return score_map > score_map.mean() + score_map.std()


def largest_component_box(mask: np.ndarray,
                          connectivity: int = 8) -> Optional[np.ndarray]:
    """Tight box, in cells, of the largest connected component of ``mask``.

    Args:
        mask: ``(h, w)`` boolean foreground.
        connectivity: 8 (diagonal neighbours connect) or 4 (edges only).

    Returns:
        ``[c0, r0, c1, r1]`` with exclusive ends (cell units), or None if the
        mask is empty. Components of equal size are resolved in favour of
        the one met first in raster order (lowest ``ndimage.label`` id).
    """
    if connectivity not in (4, 8):
        raise ValueError(f'connectivity must be 4 or 8, got {connectivity}')
    structure = ndimage.generate_binary_structure(
        2, 2 if connectivity == 8 else 1)
    labels, num = ndimage.label(mask, structure=structure)
    if num == 0:
        return None
    sizes = np.bincount(labels.ravel())[1:]
    rows, cols = np.nonzero(labels == int(np.argmax(sizes)) + 1)
    return np.array([cols.min(), rows.min(), cols.max() + 1, rows.max() + 1])


@METRICS.register_module()
class CorLoc(ScoreMapMetric):
    """Correct localisation rate of the patch-score discovery box.

    Per image: foreground ``s > mean(s) + std(s)``, the tight box of the
    largest connected component, mapped from cells to input pixels (cell
    ``(r, c)`` covers ``[c*p, (c+1)*p) x [r*p, (r+1)*p)``) and clipped to the
    input; a hit if its IoU with some ground-truth box is >= ``iou_thr``.
    An image without foreground (constant map) is a miss.

    The boxes are compared in network-input pixels, with the ground truth
    mapped there by the pipeline. For the discovery protocol the pipeline
    only resizes (no crop), and IoU is invariant under the per-axis scaling
    of a resize, so this equals the IoU of the prediction mapped back to the
    original image.

    Args:
        patch_size: Side of one score-map cell in input pixels.
        iou_thr: IoU needed for a hit.
        connectivity: 8 or 4 connectivity of the components.
        **kwargs: ``score_key`` (the ``(h, w)`` score map), ``box_key``
            (``(n, 4)`` boxes ``x1, y1, x2, y2``), ``collect_device``,
            ``prefix`` (``'corloc'`` if None) and ``collect_dir``, as
            :class:`ScoreMapMetric`.

    Returns (from ``evaluate``):
        ``corloc/CorLoc`` (fraction in [0, 1]), ``corloc/num_images`` and,
        from two batches on, ``corloc/images_per_s`` (see the module
        docstring).
    """
    default_prefix: Optional[str] = 'corloc'

    def __init__(self,
                 patch_size: int = 16,
                 iou_thr: float = 0.5,
                 connectivity: int = 8,
                 **kwargs) -> None:
        super().__init__(patch_size=patch_size, **kwargs)
        if connectivity not in (4, 8):
            raise ValueError(
                f'connectivity must be 4 or 8, got {connectivity}')
        if not 0 < iou_thr <= 1:
            raise ValueError(f'iou_thr must be in (0, 1], got {iou_thr}')
        self.iou_thr = float(iou_thr)
        self.connectivity = connectivity

    def predict_box(
            self,
            score_map: np.ndarray,
            img_shape: Optional[Sequence[int]] = None) -> Optional[np.ndarray]:
        """Discovery box in input pixels, or None without foreground."""
        cells = largest_component_box(
            foreground_mask(score_map), self.connectivity)
        if cells is None:
            return None
        box = cells.astype(np.float64) * self.patch_size
        if img_shape is not None:
            box[0::2] = np.clip(box[0::2], 0, img_shape[1])
            box[1::2] = np.clip(box[1::2], 0, img_shape[0])
        return box

    def process(self, data_batch, data_samples: Sequence[dict]) -> None:
        """Score each image: 1 if the discovery box hits a GT box."""
        now, rank = time.perf_counter(), get_rank()
        for sample in data_samples:
            score = to_score_map(
                get_field(sample, self.score_key, 'CorLoc'), self.score_key)
            boxes = to_boxes(
                get_field(sample, self.box_key, 'CorLoc'), self.box_key)
            img_shape = sample.get('img_shape')
            check_score_grid(score.shape, img_shape, self.patch_size)
            box = self.predict_box(score, img_shape)
            hit = (
                box is not None and len(boxes) > 0
                and bool(box_iou(box, boxes).max() >= self.iou_thr))
            self.results.append(dict(hit=hit, time=now, rank=rank))

    def compute_metrics(self, results: List[dict]) -> dict:
        """Fraction of hits over all processed images."""
        if not results:
            raise ValueError('CorLoc got no images to evaluate')
        hits = np.array([r['hit'] for r in results], dtype=np.float64)
        metrics = dict(CorLoc=float(hits.mean()), num_images=len(results))
        speed = images_per_second(results)
        if speed is not None:
            metrics['images_per_s'] = speed
        return metrics


def images_per_second(results: List[dict]) -> Optional[float]:
    """Throughput from per-image ``time`` (the ``process`` call's clock)
    and ``rank``: per rank, the images after its first batch over its first
    to last batch time; summed over ranks. None without a second batch."""
    total, timed = 0., False
    for rank in sorted({r.get('rank', 0) for r in results}):
        times = np.array([
            r['time'] for r in results
            if r.get('rank', 0) == rank and 'time' in r
        ])
        if times.size == 0 or times.max() <= times.min():
            continue
        later = int((times > times.min()).sum())
        total += later / float(times.max() - times.min())
        timed = True
    return total if timed else None
