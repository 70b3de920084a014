"""CorLoc of boxes discovered from patch-score maps (object discovery).

From "Vision Transformers Need More Than Registers" (Shi et al., CVPR 2026,
https://arxiv.org/abs/2602.22394): foreground is ``s > mean(s) + std(s)``
per image and CorLoc is the fraction of images whose predicted box has
IoU >= 0.5 with some ground-truth box. The paper does not say how a box is
taken from the mask; it compares with LOST's published rows, so the default
is LOST's box step (Siméoni et al., https://arxiv.org/abs/2109.14279,
github valeoai/LOST ``object_discovery.detect_box``) applied to the
patch-score mask: the tight box of the 4-connected foreground component
(``scipy.ndimage.label``'s default structure) that holds the seed, here the
highest-scoring patch. ``component='largest'`` (the largest component) and
``connectivity=8`` are options.

Throughput (images/s, Tab. 7's speed column) is the evaluator's own wall
clock: the images after the first batch over the time from the first to
the last ``process`` call, per rank, summed over ranks. It covers data
loading, the model and the box search of the test loop, not the model
alone.
"""
import logging
import time
from typing import List, Optional, Sequence, Tuple

import numpy as np
from mmengine.dist import get_rank
from mmengine.logging import print_log
from scipy import ndimage

from mmlocat.registry import METRICS
from .loc_utils import (ScoreMapMetric, box_iou, check_score_grid, get_field,
                        to_boxes, to_score_map)

__all__ = [
    'foreground_mask', 'largest_component_box', 'seed_component_box',
    'seed_cell', 'images_per_second', 'CorLoc'
]

#: Box rules of :class:`CorLoc` (``component``).
COMPONENTS = ('seed', 'largest')


def foreground_mask(score_map: np.ndarray) -> np.ndarray:
    """Foreground cells ``s > mean(s) + std(s)`` (population std, ddof 0).

    A constant map has no foreground.
    """
    return score_map > score_map.mean() + score_map.std()


def _labels(mask: np.ndarray, connectivity: int) -> Tuple[np.ndarray, int]:
    """``ndimage.label`` with 4- (its default) or 8-connectivity."""
    if connectivity not in (4, 8):
        raise ValueError(f'connectivity must be 4 or 8, got {connectivity}')
    structure = ndimage.generate_binary_structure(
        2, 2 if connectivity == 8 else 1)
    return ndimage.label(mask, structure=structure)


def _cell_box(labels: np.ndarray, label: int) -> np.ndarray:
    """``[c0, r0, c1, r1]`` (exclusive ends) of the cells of ``label``."""
    rows, cols = np.nonzero(labels == label)
    return np.array([cols.min(), rows.min(), cols.max() + 1, rows.max() + 1])


def seed_cell(score_map: np.ndarray) -> Tuple[int, int]:
    """``(row, col)`` of the highest score; ties go to the first cell in
    raster order."""
    return tuple(
        int(i)
        for i in np.unravel_index(np.argmax(score_map), score_map.shape))


def seed_component_box(mask: np.ndarray,
                       seed: Tuple[int, int],
                       connectivity: int = 4) -> Optional[np.ndarray]:
    """Tight box, in cells, of the component of ``mask`` holding ``seed``.

    LOST's box step (``detect_box``) on a boolean mask.

    Args:
        mask: ``(h, w)`` boolean foreground.
        seed: ``(row, col)`` of the seed cell.
        connectivity: 4 (edges only; LOST's, ``ndimage.label``'s default)
            or 8 (diagonal neighbours connect).

    Returns:
        ``[c0, r0, c1, r1]`` with exclusive ends (cell units), or None if the
        seed is background (LOST raises there; it cannot happen for a seed
        that is the highest score of a map with any foreground).
    """
    labels, _ = _labels(mask, connectivity)
    label = int(labels[tuple(seed)])
    if label == 0:
        return None
    return _cell_box(labels, label)


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
    labels, num = _labels(mask, connectivity)
    if num == 0:
        return None
    sizes = np.bincount(labels.ravel())[1:]
    return _cell_box(labels, int(np.argmax(sizes)) + 1)


@METRICS.register_module()
class CorLoc(ScoreMapMetric):
    """Correct localisation rate of the patch-score discovery box.

    Per image: foreground ``s > mean(s) + std(s)``; the tight box of the
    foreground component that holds the highest-scoring cell (default,
    LOST's rule) or of the largest component; mapped from cells to input
    pixels (cell ``(r, c)`` covers ``[c*p, (c+1)*p) x [r*p, (r+1)*p)``) and
    clipped to the input (LOST clips the padded cells the same way); a hit
    if its IoU (continuous areas, no +1) with some ground-truth box is
    >= ``iou_thr``. Every image counts in the denominator, as in LOST's
    loop; an image without foreground (a constant map) or without any
    ground-truth box is a miss, counted in ``num_no_foreground`` /
    ``num_without_gt`` and, for the latter, named in a warning.

    The boxes are compared in network-input pixels, with the ground truth
    mapped there by the pipeline. The discovery protocol feeds full-size
    images (the model pads them to a multiple of the patch size, as LOST),
    so those are the original image's pixels.

    Args:
        patch_size: Side of one score-map cell in input pixels.
        iou_thr: IoU needed for a hit.
        component: ``'seed'`` (the component holding the highest score;
            LOST's ``detect_box``) or ``'largest'``.
        connectivity: 4 (LOST's) or 8 connectivity of the components.
        **kwargs: ``score_key`` (the ``(h, w)`` score map), ``box_key``
            (``(n, 4)`` boxes ``x1, y1, x2, y2``), ``collect_device``,
            ``prefix`` (``'corloc'`` if None) and ``collect_dir``, as
            :class:`ScoreMapMetric`.

    Returns (from ``evaluate``):
        ``corloc/CorLoc`` (fraction in [0, 1]), ``corloc/num_images``,
        ``corloc/num_without_gt``, ``corloc/num_no_foreground`` and, from
        two batches on, ``corloc/images_per_s`` (see the module docstring).
    """
    default_prefix: Optional[str] = 'corloc'

    def __init__(self,
                 patch_size: int = 16,
                 iou_thr: float = 0.5,
                 component: str = 'seed',
                 connectivity: int = 4,
                 **kwargs) -> None:
        super().__init__(patch_size=patch_size, **kwargs)
        if component not in COMPONENTS:
            raise ValueError(f'component must be one of {COMPONENTS}, got '
                             f'{component!r}')
        if connectivity not in (4, 8):
            raise ValueError(
                f'connectivity must be 4 or 8, got {connectivity}')
        if not 0 < iou_thr <= 1:
            raise ValueError(f'iou_thr must be in (0, 1], got {iou_thr}')
        self.iou_thr = float(iou_thr)
        self.component = component
        self.connectivity = connectivity

    def predict_box(
            self,
            score_map: np.ndarray,
            img_shape: Optional[Sequence[int]] = None) -> Optional[np.ndarray]:
        """Discovery box in input pixels, or None without foreground."""
        mask = foreground_mask(score_map)
        if self.component == 'seed':
            cells = seed_component_box(mask, seed_cell(score_map),
                                       self.connectivity)
        else:
            cells = largest_component_box(mask, self.connectivity)
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
            self.results.append(
                dict(
                    hit=hit,
                    time=now,
                    rank=rank,
                    no_foreground=box is None,
                    without_gt=None if len(boxes) else str(
                        sample.get('img_path', sample.get('sample_idx')))))

    def compute_metrics(self, results: List[dict]) -> dict:
        """Fraction of hits over all processed images."""
        if not results:
            raise ValueError('CorLoc got no images to evaluate')
        hits = np.array([r['hit'] for r in results], dtype=np.float64)
        without_gt = [r['without_gt'] for r in results if r.get('without_gt')]
        if without_gt:
            print_log(
                f'CorLoc: {len(without_gt)} of {len(results)} images have '
                'no ground-truth box and count as misses, e.g. '
                f'{without_gt[:10]}',
                logger='current',
                level=logging.WARNING)
        metrics = dict(
            CorLoc=float(hits.mean()),
            num_images=len(results),
            num_without_gt=len(without_gt),
            num_no_foreground=sum(
                bool(r.get('no_foreground')) for r in results))
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
