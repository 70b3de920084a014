"""Coarse (foreground / background) segmentation from patch scores.

From "Vision Transformers Need More Than Registers" (Shi et al., CVPR 2026,
https://arxiv.org/abs/2602.22394, Tab. 6): foreground is
``s > mean(s) + std(s)`` of each image's patch-score map, upsampled to the
image and compared with the union of the object classes of a semantic
ground truth (PASCAL VOC 2012 val). The paper does not say how the mask is
upsampled or how the IoU is aggregated, and the protocol it cites (CRATE)
released no evaluation code; here (mmlocat's choice) every pixel takes its
patch cell's value (the cells of a padded input, LOST's geometry, cover
the image and the padding is cut off; pixels past the last full cell of a
cropped input take the nearest cell's) and the IoU is accumulated over the
whole dataset, as mmseg's ``IoUMetric`` does. Which of the reported IoUs
is the paper's "mIoU" is not known (the README discusses it).
"""
from typing import List, Optional, Sequence

import numpy as np

from mmlocat.registry import METRICS
from .corloc import foreground_mask
from .loc_utils import (ScoreMapMetric, check_score_grid, get_field,
                        to_score_map)

__all__ = ['upsample_cells', 'CoarseSegIoU']


def upsample_cells(cells: np.ndarray, patch_size: int,
                   shape: Sequence[int]) -> np.ndarray:
    """``(h, w)`` cell values -> ``(H, W)`` pixels: each cell covers its
    ``patch_size`` square; a remainder past the grid takes the nearest cell,
    a grid larger than the image (padded input) is cropped."""
    full = np.repeat(np.repeat(cells, patch_size, 0), patch_size, 1)
    height, width = int(shape[0]), int(shape[1])
    full = full[:height, :width]
    pad = ((0, height - full.shape[0]), (0, width - full.shape[1]))
    return np.pad(full, pad, mode='edge')


@METRICS.register_module()
class CoarseSegIoU(ScoreMapMetric):
    """Foreground / background IoU of the patch-score mask.

    Per image: foreground cells ``s > mean(s) + std(s)``, upsampled with
    :func:`upsample_cells` to the network input (which must be the ground
    truth's size: the protocol feeds full-resolution images); ground-truth
    foreground = every label other than ``background_index`` and
    ``ignore_index`` (ignored pixels are not scored).

    Args:
        patch_size: Side of one score-map cell in input pixels.
        background_index: Ground-truth label of the background.
        ignore_index: Ground-truth label that is not scored (VOC: 255).
        seg_key: Data-sample field with the ``(H, W)`` ground-truth labels
            (mmseg's ``LoadAnnotations`` + ``PackInputs(algorithm_keys=
            ('gt_seg_map', ))``).
        **kwargs: ``score_key`` (the ``(h, w)`` score map),
            ``collect_device``, ``prefix`` and ``collect_dir``, as
            :class:`ScoreMapMetric`.

    Returns (from ``evaluate``):
        ``coarse_seg/fg_IoU``, ``coarse_seg/bg_IoU`` and their mean
        ``coarse_seg/mIoU`` (percent, dataset-level), and
        ``coarse_seg/num_images``.
    """
    default_prefix: Optional[str] = 'coarse_seg'

    def __init__(self,
                 patch_size: int = 16,
                 background_index: int = 0,
                 ignore_index: int = 255,
                 seg_key: str = 'gt_seg_map',
                 **kwargs) -> None:
        super().__init__(patch_size=patch_size, box_key=seg_key, **kwargs)
        if background_index == ignore_index:
            raise ValueError('background_index and ignore_index must differ, '
                             f'both are {ignore_index}')
        self.background_index = int(background_index)
        self.ignore_index = int(ignore_index)
        self.seg_key = seg_key

    def process(self, data_batch, data_samples: Sequence[dict]) -> None:
        """Intersections and unions of one batch."""
        for sample in data_samples:
            score = to_score_map(
                get_field(sample, self.score_key, 'CoarseSegIoU'),
                self.score_key)
            gt = np.asarray(get_field(sample, self.seg_key, 'CoarseSegIoU'))
            gt = gt.reshape(gt.shape[-2:]) if gt.ndim > 2 else gt
            img_shape = sample.get('img_shape', gt.shape)
            if tuple(img_shape[:2]) != gt.shape:
                raise ValueError(
                    f'CoarseSegIoU: the network input {tuple(img_shape[:2])}'
                    f' of {sample.get("img_path", "an image")} is not its '
                    f'ground truth size {gt.shape} (the protocol feeds '
                    'full-resolution images: no Resize; an EXIF-rotated '
                    'JPEG? see mmlocat.CheckAnnotatedSize)')
            check_score_grid(score.shape, img_shape, self.patch_size)
            pred = upsample_cells(
                foreground_mask(score), self.patch_size, gt.shape)
            valid = gt != self.ignore_index
            target = (gt != self.background_index) & valid
            pred_bg, target_bg = ~pred & valid, ~target & valid
            pred = pred & valid
            self.results.append(
                dict(
                    fg_inter=int((pred & target).sum()),
                    fg_union=int((pred | target).sum()),
                    bg_inter=int((pred_bg & target_bg).sum()),
                    bg_union=int((pred_bg | target_bg).sum())))

    def compute_metrics(self, results: List[dict]) -> dict:
        """Dataset-level IoUs in percent."""
        if not results:
            raise ValueError('CoarseSegIoU got no images to evaluate')
        total = {
            k: sum(r[k] for r in results)
            for k in ('fg_inter', 'fg_union', 'bg_inter', 'bg_union')
        }
        fg = 100. * total['fg_inter'] / max(total['fg_union'], 1)
        bg = 100. * total['bg_inter'] / max(total['bg_union'], 1)
        return dict(
            fg_IoU=fg, bg_IoU=bg, mIoU=(fg + bg) / 2, num_images=len(results))
