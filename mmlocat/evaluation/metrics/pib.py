"""Point-in-Box (PiB): does the highest-scoring patch lie on the object?

From "Vision Transformers Need More Than Registers" (Shi et al., CVPR 2026,
https://arxiv.org/abs/2602.22394), section on patch scores: PiB is the
fraction of images whose argmax patch-score cell overlaps the ground-truth
box. The protocol (ImageNet-val LOC boxes, one box < 25% of the image,
Resize 256 + CenterCrop 224) lives in the dataset and pipeline; this metric
only needs the score map and the boxes in network-input coordinates.

Two protocols: ``'exact'`` (default) is the geometrically correct rule on
boxes mapped by the pipeline; ``'public'`` is the rule of the authors'
``visualization/evaluate_patch_hit.py`` (ChengShiest/LAST-ViT), restated in
:func:`public_hit_window`, for numbers comparable with theirs.
"""
from typing import List, Optional, Sequence, Tuple

import numpy as np

from mmlocat.registry import METRICS
from .loc_utils import (ScoreMapMetric, check_score_grid, get_field, to_boxes,
                        to_score_map)

__all__ = [
    'point_in_box', 'public_hit_window', 'public_point_in_box', 'PointInBox',
    'PIB_PROTOCOLS'
]

PIB_PROTOCOLS = ('exact', 'public')


def point_in_box(score_map: np.ndarray,
                 boxes: np.ndarray,
                 patch_size: int = 16) -> bool:
    """Whether the argmax cell of ``score_map`` overlaps any box.

    Cell ``(r, c)`` covers pixels ``[c*p, (c+1)*p) x [r*p, (r+1)*p)``. A cell
    counts as "in the box" when the overlap has positive area, so a box edge
    that only touches a cell border does not count. Ties of the maximum are
    broken by the first cell in raster order (``np.argmax``).

    Args:
        score_map: ``(h, w)`` patch scores.
        boxes: ``(n, 4)`` boxes ``x1, y1, x2, y2`` in input pixels.
        patch_size: Side of one patch cell in input pixels.

    Returns:
        True if the argmax cell overlaps at least one box; False for no
        boxes or boxes of zero area (e.g. cropped away).
    """
    row, col = np.unravel_index(int(np.argmax(score_map)), score_map.shape)
    x0, y0 = col * patch_size, row * patch_size
    x1, y1 = x0 + patch_size, y0 + patch_size
    width = np.minimum(boxes[:, 2], x1) - np.maximum(boxes[:, 0], x0)
    height = np.minimum(boxes[:, 3], y1) - np.maximum(boxes[:, 1], y0)
    return bool(((width > 0) & (height > 0)).any())


def public_hit_window(box: Sequence[float],
                      image_wh: Tuple[int, int],
                      resize: int = 256,
                      crop_size: int = 224,
                      patch_size: int = 16) -> Tuple[range, range]:
    """Cells the public ``evaluate_patch_hit.py`` counts as in the box.

    Its rule, differences from the exact one marked: one scale factor
    ``resize / min(w, h)`` for both axes (the resized sides are truncated
    with ``int``, the factors are not); the centre-crop offset is floored
    (torchvision rounds it); the box, in raw annotation integers (no 1-based
    shift), is mapped and clipped to ``[0, crop_size]``; every cell from
    ``floor(min / p)`` to ``floor(max / p)`` counts, so a cell the box only
    touches counts, and a box cropped off at the left / top still hits
    column / row 0 (one cropped off at the right / bottom hits nothing).

    Args:
        box: ``(xmin, ymin, xmax, ymax)`` as in the annotation file.
        image_wh: Original ``(width, height)`` (the annotation's size).
        resize: Short side after the resize.
        crop_size: Side of the centre crop.
        patch_size: Cell side.

    Returns:
        ``(rows, cols)``: the counted cells are ``rows x cols``.
    """
    width, height = (int(v) for v in image_wh)
    scale = float(resize) / min(width, height)
    offsets = ((int(width * scale) - crop_size) // 2,
               (int(height * scale) - crop_size) // 2)
    lo, hi = [], []
    for axis in (0, 1):  # x, y
        ends = (float(box[axis]), float(box[axis + 2]))
        mapped = [
            max(0, min(crop_size, v * scale - offsets[axis])) for v in ends
        ]
        lo.append(int(mapped[0] // patch_size))
        hi.append(
            min(int(mapped[1] // patch_size) + 1, crop_size // patch_size))
    return range(lo[1], hi[1]), range(lo[0], hi[0])


def public_point_in_box(score_map: np.ndarray, box: Sequence[float],
                        image_wh: Tuple[int, int], **kwargs) -> bool:
    """Hit of the public script: the first raster-order argmax cell lies in
    :func:`public_hit_window` (``kwargs``: its ``resize``, ``crop_size``,
    ``patch_size``)."""
    row, col = np.unravel_index(int(np.argmax(score_map)), score_map.shape)
    rows, cols = public_hit_window(box, image_wh, **kwargs)
    return int(row) in rows and int(col) in cols


@METRICS.register_module()
class PointInBox(ScoreMapMetric):
    """Point-in-Box accuracy of patch-score maps.

    Every data sample must carry the per-image score map (``score_key``,
    shape ``(h, w)``, e.g. set by :class:`mmlocat.PatchScoreClassifier`) and
    the ground-truth boxes (``box_key``, ``(n, 4)`` in the coordinates of the
    network input, e.g. packed with ``PackInputs(algorithm_keys=
    ('gt_bboxes',))`` after ``mmlocat.RescaleBoxes`` and ``CenterCrop``).
    With several boxes an image is a hit if the argmax cell overlaps any.

    With ``protocol='public'`` the metric applies the public script's rule
    (:func:`public_hit_window`) itself: it reads the *unmapped* annotation
    boxes (``box_key``, by default ``'ori_gt_bboxes'``, kept by
    ``mmlocat.KeepOriginalBoxes`` before any resize, from a dataset with
    ``one_based=False``) and the original image size (``ori_shape``), and,
    as the script, uses the first box only. The score map must be the
    ``crop_size / patch_size`` square grid.

    Args:
        patch_size: Side of one score-map cell in input pixels.
        box_key: Data-sample field with the boxes; None: ``'gt_bboxes'``
            ('exact') or ``'ori_gt_bboxes'`` ('public').
        protocol: ``'exact'`` (any positive-area overlap with the mapped
            boxes) or ``'public'`` (``evaluate_patch_hit.py``).
        resize: Short side of the public protocol's resize.
        crop_size: Side of the public protocol's centre crop.
        **kwargs: ``score_key`` (the score map), ``collect_device``,
            ``prefix`` (``'pib'`` if None) and ``collect_dir``, as
            :class:`ScoreMapMetric`.

    Returns (from ``evaluate``):
        ``pib/PiB`` (fraction in [0, 1]) and ``pib/num_images``.
    """
    default_prefix: Optional[str] = 'pib'

    def __init__(self,
                 patch_size: int = 16,
                 box_key: Optional[str] = None,
                 protocol: str = 'exact',
                 resize: int = 256,
                 crop_size: int = 224,
                 **kwargs) -> None:
        if protocol not in PIB_PROTOCOLS:
            raise ValueError(f'protocol must be one of {PIB_PROTOCOLS}, got '
                             f'{protocol!r}')
        if box_key is None:
            box_key = 'ori_gt_bboxes' if protocol == 'public' else 'gt_bboxes'
        super().__init__(patch_size=patch_size, box_key=box_key, **kwargs)
        if protocol == 'public' and not 0 < crop_size <= resize:
            raise ValueError('the public protocol needs 0 < crop_size <= '
                             f'resize, got crop_size={crop_size}, '
                             f'resize={resize}')
        self.protocol = protocol
        self.resize = int(resize)
        self.crop_size = int(crop_size)

    def process(self, data_batch, data_samples: Sequence[dict]) -> None:
        """Score each image: 1 if its argmax cell is in a box, else 0."""
        for sample in data_samples:
            score = to_score_map(
                get_field(sample, self.score_key, 'PointInBox'),
                self.score_key)
            boxes = to_boxes(
                get_field(sample, self.box_key, 'PointInBox'), self.box_key)
            if self.protocol == 'public':
                hit = self._public_hit(score, boxes, sample)
            else:
                check_score_grid(score.shape, sample.get('img_shape'),
                                 self.patch_size)
                hit = point_in_box(score, boxes, self.patch_size)
            self.results.append(dict(hit=hit))

    def _public_hit(self, score: np.ndarray, boxes: np.ndarray,
                    sample: dict) -> bool:
        side = self.crop_size // self.patch_size
        if score.shape != (side, side):
            raise ValueError(
                f'the public PiB protocol needs a {side}x{side} score map '
                f'(crop_size={self.crop_size}, patch_size={self.patch_size})'
                f', got {score.shape}')
        ori_shape = get_field(sample, 'ori_shape', 'PointInBox')
        if len(boxes) == 0:
            raise ValueError(f'{self.box_key} is empty; the public protocol '
                             'scores the first box of each image')
        height, width = (int(v) for v in ori_shape[:2])
        return public_point_in_box(
            score,
            boxes[0], (width, height),
            resize=self.resize,
            crop_size=self.crop_size,
            patch_size=self.patch_size)

    def compute_metrics(self, results: List[dict]) -> dict:
        """Fraction of hits over all processed images."""
        if not results:
            raise ValueError('PointInBox got no images to evaluate')
        hits = np.array([r['hit'] for r in results], dtype=np.float64)
        return dict(PiB=float(hits.mean()), num_images=len(results))
