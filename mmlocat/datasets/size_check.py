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

from mmcv.transforms import BaseTransform

from mmlocat.registry import TRANSFORMS

__all__ = ['CheckAnnotatedSize']


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
        return results
