"""Refuse an image decoded at another size than its annotation states.

Object discovery and coarse segmentation compare boxes / label maps in the
pixels of the original image. A JPEG with an EXIF orientation tag decodes
rotated when the orientation is applied (mmcv's default ``color_type``),
e.g. 500x375 against a 375x500 annotation, and its boxes then silently
miss. LOST (Siméoni et al., https://arxiv.org/abs/2109.14279; github
valeoai/LOST) decodes with PIL without EXIF transposition, which is
``LoadImageFromFile(color_type='color_ignore_orientation',
imdecode_backend='pillow')``; :class:`CheckAnnotatedSize` after it turns any
remaining disagreement into an error naming the image.
"""
from typing import Optional, Sequence

import numpy as np
from mmcv.transforms import BaseTransform

from mmlocat.registry import TRANSFORMS

__all__ = ['CheckAnnotatedSize', 'boxes_outside', 'BOX_TOLERANCE']

#: Pixels a box edge may lie outside its image (rounding in converters).
BOX_TOLERANCE = 1.0


def boxes_outside(boxes: np.ndarray,
                  hw: Sequence[int],
                  where: str,
                  tolerance: float = BOX_TOLERANCE) -> Optional[str]:
    """What is wrong with ``(n, 4)`` boxes ``x1, y1, x2, y2`` that reach
    more than ``tolerance`` pixels outside an image of ``hw`` (its
    ``(height, width)``), or None; ``where`` names the image (file, id)
    in the text."""
    boxes = getattr(boxes, 'tensor', boxes)  # mmdet's box types
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    h, w = float(hw[0]), float(hw[1])
    low, high = -tolerance, np.array([w, h, w, h]) + tolerance
    bad = ((boxes < low) | (boxes > high)).any(axis=1)
    if not bad.any():
        return None
    shown = [[round(float(v), 2) for v in box] for box in boxes[bad][:5]]
    return (f'{where}: {int(bad.sum())} box(es) outside the '
            f'{int(h)}x{int(w)} (HxW) image, e.g. {shown} (x1, y1, x2, y2 '
            'in pixels): a wrong annotation or one of another image; fix it')


def _hw(shape: Sequence[int]) -> tuple:
    return tuple(int(v) for v in shape[:2])


@TRANSFORMS.register_module()
class CheckAnnotatedSize(BaseTransform):
    """Check the decoded image size against the annotation's.

    Put it right after the loading steps, before any resize. It compares
    ``img``'s ``(height, width)`` with ``ann_img_shape`` (the size a box
    annotation states: the VOC XML ``<size>`` or the COCO image's
    ``height`` / ``width``, set by :class:`~mmlocat.datasets.
    ImageNetLocDataset` / :class:`~mmlocat.datasets.CocoBoxesDataset`)
    and with ``gt_seg_map`` (a segmentation ground truth loaded before it).

    Boxes (``gt_bboxes``) must lie inside the decoded image
    (:func:`boxes_outside`; the box datasets check them against the
    annotated size while loading, this catches annotations without one).

    **Required keys:** ``img`` and at least one of ``ann_img_shape``,
    ``gt_seg_map``. **Modified keys:** none.

    Raises:
        ValueError: On a mismatch, naming the image, both sizes and the
            usual cause; or if there is nothing to compare with.
    """

    def transform(self, results: dict) -> Optional[dict]:
        """Return ``results`` unchanged if every size agrees."""
        name = results.get('img_path', results.get('sample_idx'))
        decoded = _hw(results['img'].shape)
        references = []
        if results.get('ann_img_shape') is not None:
            references.append(
                ('its annotation', _hw(results['ann_img_shape'])))
        if results.get('gt_seg_map') is not None:
            references.append(
                ('its label map', _hw(results['gt_seg_map'].shape)))
        if not references:
            raise ValueError(
                f'CheckAnnotatedSize: no annotated size for {name} (no '
                '"ann_img_shape" from the dataset, no "gt_seg_map"); the '
                'annotation has no <size>? Drop the check from the pipeline '
                'to evaluate without it')
        for what, size in references:
            if size != decoded:
                raise ValueError(
                    f'{name} decodes as {decoded[0]}x{decoded[1]} (h x w) '
                    f'but {what} says {size[0]}x{size[1]}: its boxes / '
                    'labels would not line up. An EXIF-rotated JPEG? Load '
                    "with color_type='color_ignore_orientation' (as LOST's "
                    'PIL loading), or fix the file')
        if results.get('gt_bboxes') is not None:
            outside = boxes_outside(
                results['gt_bboxes'], decoded, f'{name} (image id '
                f"{results.get('img_id', '?')})")
            if outside is not None:
                raise ValueError(outside)
        return results
