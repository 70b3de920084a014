"""CoarseSegIoU: the patch-score foreground mask against VOC-style labels."""
import numpy as np
import pytest
import torch

from mmlocat.evaluation import CoarseSegIoU
from mmlocat.evaluation.metrics.coarse_seg import upsample_cells


def _evaluate(metric, samples):
    metric.process({}, samples)
    return metric.compute_metrics(metric.results)


def test_upsample_cells_crop_and_edge():
    cells = np.array([[1, 0], [0, 1]])
    out = upsample_cells(cells, 2, (5, 3))  # grid 4x4 px: crop w, pad h
    np.testing.assert_array_equal(
        out, [[1, 1, 0], [1, 1, 0], [0, 0, 1], [0, 0, 1], [0, 0, 1]])


def test_ious_by_hand():
    # 2x2 grid of 4-px cells; one cell scores high: s > mean + std.
    score = torch.tensor([[[5., 0.], [0., 0.]]])
    gt = np.zeros((8, 8), np.uint8)
    gt[0:4, 0:6] = 3  # object: the top-left cell plus 8 pixels beyond it
    gt[7, 7] = 255  # ignored
    metric = CoarseSegIoU(patch_size=4)
    res = _evaluate(metric,
                    [dict(patch_score=score, gt_seg_map=gt, img_shape=(8, 8))])
    fg = 16 / 24
    bg = (64 - 24 - 1) / (64 - 16 - 1)
    assert res['fg_IoU'] == pytest.approx(100 * fg)
    assert res['bg_IoU'] == pytest.approx(100 * bg)
    assert res['mIoU'] == pytest.approx(50 * (fg + bg))
    assert res['num_images'] == 1


def test_dataset_level_accumulation():
    hit = dict(
        patch_score=np.array([[9., 0.], [0., 0.]]),
        gt_seg_map=np.pad(np.ones((2, 2), np.uint8), ((0, 2), (0, 2))),
        img_shape=(4, 4))
    miss = dict(
        patch_score=np.array([[9., 0.], [0., 0.]]),
        gt_seg_map=np.pad(np.ones((2, 2), np.uint8), ((2, 0), (2, 0))),
        img_shape=(4, 4))
    res = _evaluate(CoarseSegIoU(patch_size=2), [hit, miss])
    assert res['fg_IoU'] == pytest.approx(100 * 4 / (4 + 8))


def test_errors():
    metric = CoarseSegIoU(patch_size=4)
    sample = dict(
        patch_score=np.zeros((2, 2)),
        gt_seg_map=np.zeros((8, 8)),
        img_shape=(16, 16))
    with pytest.raises(ValueError, match='a.jpg is not its ground truth'):
        metric.process({}, [dict(sample, img_path='a.jpg')])
    with pytest.raises(ValueError, match='patch grid'):
        metric.process(
            {}, [dict(sample, img_shape=(8, 8), patch_score=np.zeros((3, 3)))])
    with pytest.raises(KeyError, match="'gt_seg_map'"):
        metric.process({}, [dict(patch_score=np.zeros((2, 2)))])
    with pytest.raises(ValueError, match='must differ'):
        CoarseSegIoU(background_index=255)
    with pytest.raises(ValueError, match='no images'):
        metric.compute_metrics([])
