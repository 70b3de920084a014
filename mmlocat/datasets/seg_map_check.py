"""Check a loaded segmentation label map against its image.

mmseg's ``LoadAnnotations`` reads the label PNG at whatever size it has,
and the first ``Resize`` / ``RandomResize`` then scales image and label to
the same size: a label map at half the image's resolution trains silently
misaligned. :class:`CheckSegMap`, placed right after ``LoadAnnotations``,
compares the label map with the image as decoded (``ori_shape``) before
anything resizes them, and checks the label values and the channels.

A label map is one channel of class indices. A grey PNG saved as RGB
(three channels) loads as ``(h, w, 3)`` and ends a run inside mmseg's
collation (``stack expects each tensor to be equal size``) without a file
name: it is refused (``label_channels``) naming the file, whether or not
its channels are equal; it is not read as one channel silently, because
an RGB colour map (each class a colour) would then train on wrong
labels. The fix: save it as one channel.
"""
from typing import Optional

import mmcv
import numpy as np
from mmcv.transforms import BaseTransform

from mmlocat.registry import TRANSFORMS
from mmlocat.utils.counted_log import CountedWarning
from .file_checks import DataFileError, Fault, hw_text, rotation_hint

__all__ = ['CheckSegMap', 'SIZE_POLICIES', 'seg_map_faults']

SIZE_POLICIES = ('error', 'resize')


def seg_map_faults(results: dict,
                   num_classes: Optional[int] = None,
                   ignore_index: int = 255) -> list:
    """The faults of ``results['gt_seg_map']``: a size other than the
    image's ``ori_shape`` (``size_mismatch``) and, with ``num_classes``,
    values outside ``[0, num_classes)`` that are not ``ignore_index``
    (``label_out_of_range``; the values after ``reduce_zero_label`` and
    ``label_map``, as the loss sees them)."""
    label = results['gt_seg_map']
    path = results.get('seg_map_path', '<label map>')
    faults = []
    if label.ndim == 3 and label.shape[2] > 1:
        same = all(
            np.array_equal(label[..., 0], label[..., c])
            for c in range(1, label.shape[2]))
        what = ('all equal: a grey map saved as RGB'
                if same else 'that differ: a colour map, not class indices')
        faults.append(
            Fault(
                'label_channels', path,
                f'label map has {label.shape[2]} channels ({what}); a '
                'label map is one channel of class indices (mmseg stops '
                'with "stack expects each tensor to be equal size"): save '
                "it as a one-channel PNG, e.g. PIL's "
                "Image.open(path).convert('L').save(path)"
                if same else 'label map has '
                f'{label.shape[2]} channels ({what}); a label map is one '
                'channel of class indices: convert the colours to class '
                'indices and save a one-channel PNG'))
    image_hw = tuple(results['ori_shape'][:2])
    if tuple(label.shape[:2]) != image_hw:
        faults.append(
            Fault(
                'size_mismatch', path,
                f'label map is {hw_text(label.shape)} (HxW) but its image '
                f'{results.get("img_path")} is {hw_text(image_hw)}'
                f'{rotation_hint(results)}'))
    if num_classes is not None:
        bad = (label >= num_classes) & (label != ignore_index)
        if bad.any():
            values = np.unique(label[bad])
            faults.append(
                Fault(
                    'label_out_of_range', path,
                    f'{int(bad.sum())} pixel(s) with label values '
                    f'{values[:10].tolist()} outside the {num_classes} '
                    f'classes 0..{num_classes - 1} and the ignore index '
                    f'{ignore_index} (values after reduce_zero_label='
                    f'{results.get("reduce_zero_label")})'))
    return faults


@TRANSFORMS.register_module()
class CheckSegMap(BaseTransform):
    """Refuse a label map whose size is not its image's, or resize it.

    Put it right after ``LoadAnnotations`` (mmlocat's tools and
    :class:`mmlocat.CheckedDataset` insert it there when a pipeline lacks
    one). Does nothing to samples without ``gt_seg_map``.

    Args:
        size_mismatch: ``'error'`` (default): raise
            :class:`~mmlocat.datasets.file_checks.DataFileError` naming the
            label file, the image and both sizes. ``'resize'``: the explicit
            opt-in to scale the label map to the image's size
            (nearest neighbour, as mmseg's ``Resize`` scales labels); each
            process logs a running count.
        num_classes: When given, label values must be below it or equal
            ``ignore_index`` (values the loss would index out of range;
            on CUDA a device-side assert without a file name).
        ignore_index: The ignored label value (mmseg's 255).
    """

    def __init__(self,
                 size_mismatch: str = 'error',
                 num_classes: Optional[int] = None,
                 ignore_index: int = 255) -> None:
        if size_mismatch not in SIZE_POLICIES:
            raise ValueError(f'size_mismatch must be one of {SIZE_POLICIES}, '
                             f'got {size_mismatch!r}')
        if num_classes is not None and num_classes < 1:
            raise ValueError(f'num_classes must be >= 1, got {num_classes}')
        self.size_mismatch = size_mismatch
        self.num_classes = num_classes
        self.ignore_index = ignore_index
        self.resized = CountedWarning(
            "label maps resized to their image's size "
            "(CheckSegMap(size_mismatch='resize'))")

    def transform(self, results: dict) -> dict:
        if results.get('gt_seg_map') is None:
            return results
        faults = seg_map_faults(results, self.num_classes, self.ignore_index)
        if self.size_mismatch == 'resize':
            sized = [f for f in faults if f.kind == 'size_mismatch']
            faults = [f for f in faults if f.kind != 'size_mismatch']
            if sized:
                h, w = results['ori_shape'][:2]
                results['gt_seg_map'] = mmcv.imresize(
                    results['gt_seg_map'], (w, h), interpolation='nearest')
                self.resized.add(str(sized[0]))
        if faults:
            sized = any(f.kind == 'size_mismatch' for f in faults)
            hint = ('' if self.size_mismatch == 'resize' or not sized else
                    '; fix the annotation, or opt in to resizing it with '
                    "CheckSegMap(size_mismatch='resize') (mmlocat's tools: "
                    '--cfg-options checked_dataset.seg_map_size=resize)')
            raise DataFileError('; '.join(map(str, faults)) + hint, faults[0])
        return results

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(size_mismatch={self.size_mismatch!r}, '
                f'num_classes={self.num_classes}, '
                f'ignore_index={self.ignore_index})')
