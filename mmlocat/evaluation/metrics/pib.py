"""Point-in-Box (PiB): does the highest-scoring patch lie on the object?

From "Vision Transformers Need More Than Registers" (Shi et al., CVPR 2026,
https://arxiv.org/abs/2602.22394), section on patch scores: PiB is the
fraction of images whose argmax patch-score cell overlaps the ground-truth
box. The protocol (ImageNet-val LOC boxes, one box < 25% of the image,
Resize 256 + CenterCrop 224) lives in the dataset and pipeline; this metric
only needs the score map and the boxes in network-input coordinates.
"""
from typing import List, Optional, Sequence

import numpy as np

from mmlocat.registry import METRICS
from .loc_utils import (ScoreMapMetric, check_score_grid, get_field, to_boxes,
                        to_score_map)

__all__ = ['point_in_box', 'PointInBox']


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


@METRICS.register_module()
class PointInBox(ScoreMapMetric):
    """Point-in-Box accuracy of patch-score maps.

    Every data sample must carry the per-image score map (``score_key``,
    shape ``(h, w)``, e.g. set by :class:`mmlocat.PatchScoreClassifier`) and
    the ground-truth boxes (``box_key``, ``(n, 4)`` in the coordinates of the
    network input, e.g. packed with ``PackInputs(algorithm_keys=
    ('gt_bboxes',))`` after ``mmlocat.RescaleBoxes`` and ``CenterCrop``).
    With several boxes an image is a hit if the argmax cell overlaps any.

    Args:
        patch_size: Side of one score-map cell in input pixels.
        score_key: Data-sample field with the score map.
        box_key: Data-sample field with the boxes.
        collect_device: Device used to gather results across ranks.
        prefix: Metric name prefix, ``'pib'`` if None.
        collect_dir: Folder for CPU collection across ranks.

    Returns (from ``evaluate``):
        ``pib/PiB`` (fraction in [0, 1]) and ``pib/num_images``.
    """
    default_prefix: Optional[str] = 'pib'

    def process(self, data_batch, data_samples: Sequence[dict]) -> None:
        """Score each image: 1 if its argmax cell is in a box, else 0."""
        for sample in data_samples:
            score = to_score_map(
                get_field(sample, self.score_key, 'PointInBox'),
                self.score_key)
            boxes = to_boxes(
                get_field(sample, self.box_key, 'PointInBox'), self.box_key)
            check_score_grid(score.shape, sample.get('img_shape'),
                             self.patch_size)
            self.results.append(
                dict(hit=point_in_box(score, boxes, self.patch_size)))

    def compute_metrics(self, results: List[dict]) -> dict:
        """Fraction of hits over all processed images."""
        if not results:
            raise ValueError('PointInBox got no images to evaluate')
        hits = np.array([r['hit'] for r in results], dtype=np.float64)
        return dict(PiB=float(hits.mean()), num_images=len(results))
