"""PointInBox: exact values on hand-made score maps and boxes."""
import numpy as np
import pytest
import torch

from mmlocat.evaluation import PointInBox
from mmlocat.evaluation.metrics.pib import point_in_box


def _peak_map(row, col, size=(14, 14)):
    score = np.zeros(size)
    score[row, col] = 1.0
    return score


def _run_metric(metric, samples):
    metric.process(None, samples)
    return metric.evaluate(len(samples))


def test_any_overlap_rule_at_cell_borders():
    # Argmax cell (r=3, c=5) covers x in [80, 96), y in [48, 64).
    score = _peak_map(3, 5)
    inside = np.array([[85., 50., 90., 60.]])
    touch_right = np.array([[96., 40., 130., 70.]])  # x1 == cell end
    touch_left = np.array([[10., 40., 80., 70.]])  # x2 == cell start
    touch_top = np.array([[70., 0., 120., 48.]])  # y2 == cell start
    sliver = np.array([[95.5, 63.9, 130., 70.]])  # 0.5 x 0.1 px overlap
    assert point_in_box(score, inside)
    assert not point_in_box(score, touch_right)
    assert not point_in_box(score, touch_left)
    assert not point_in_box(score, touch_top)
    assert point_in_box(score, sliver)
    # Several boxes: any one is enough; none or a zero-area box is a miss.
    assert point_in_box(score, np.concatenate([touch_left, sliver]))
    assert not point_in_box(score, np.zeros((0, 4)))
    assert not point_in_box(score, np.array([[85., 50., 85., 60.]]))


def test_patch_size_and_tie_break():
    score = _peak_map(1, 1, size=(4, 4))
    box = np.array([[8., 8., 12., 12.]])
    assert point_in_box(score, box, patch_size=8)  # cell [8, 16)
    assert not point_in_box(score, box, patch_size=16)  # cell [16, 32)
    ties = np.ones((4, 4))  # argmax = first cell in raster order
    assert point_in_box(ties, np.array([[0., 0., 1., 1.]]), patch_size=16)
    assert not point_in_box(ties, np.array([[16., 0., 20., 4.]]))


def test_box_mapped_through_resize256_crop224():
    """A 400x300 image, box [100, 60, 200, 150] through the PiB pipeline.

    Resize short side 300 -> 256: w = int(256 * 400 / 300) = 341, factors
    (341/400, 256/300); CenterCrop 224: offsets x = round(58.5) = 58,
    y = 16. Mapped box: x 100 * 0.8525 - 58 = 27.25 .. 200 * 0.8525 - 58 =
    112.5; y 60 * 256/300 - 16 = 35.2 .. 150 * 256/300 - 16 = 112.
    """
    from mmcv.transforms import CenterCrop

    from mmlocat.datasets import ResizeEdgeWithBoxes
    results = dict(
        img=np.zeros((300, 400, 3), np.uint8),
        gt_bboxes=np.array([[100., 60., 200., 150.]], np.float32))
    results = ResizeEdgeWithBoxes(scale=256)(results)
    results = CenterCrop(crop_size=224)(results)
    box = results['gt_bboxes']
    assert results['img'].shape[:2] == (224, 224)
    np.testing.assert_allclose(box, [[27.25, 35.2, 112.5, 112.0]], atol=1e-4)

    metric = PointInBox(patch_size=16)
    samples = [
        dict(
            patch_score=torch.from_numpy(_peak_map(row, col)),
            gt_bboxes=box,
            img_shape=(224, 224)) for row, col in [
                (6, 7),  # c=7 (x 112..128) overlaps 0.5 px past 112: hit
                (7, 3),  # r=7 (y 112..128) only touches y2 = 112: miss
                (2, 1),  # c=1, r=2 (x 16..32, y 32..48) overlaps: hit
                (4, 0),  # c=0 (x 0..16) left of x1 = 27.25: miss
            ]
    ]
    assert _run_metric(metric, samples) == {
        'pib/PiB': 0.5,
        'pib/num_images': 4
    }


def test_metric_accepts_batched_maps_and_counts():
    metric = PointInBox(prefix='loc')
    box = np.array([[0., 0., 16., 16.]])
    samples = [
        dict(
            patch_score=torch.from_numpy(_peak_map(0, 0))[None], gt_bboxes=box)
        for _ in range(3)
    ] + [dict(patch_score=_peak_map(5, 5).tolist(), gt_bboxes=box)]
    assert _run_metric(metric, samples) == {
        'loc/PiB': 0.75,
        'loc/num_images': 4
    }


@pytest.mark.parametrize(
    'sample, error',
    [
        (dict(gt_bboxes=np.zeros((1, 4))), KeyError),
        (dict(patch_score=np.zeros((2, 2))), KeyError),
        (dict(patch_score=np.full((2, 2), np.nan), gt_bboxes=np.zeros(
            (1, 4))), ValueError),
        (dict(patch_score=np.zeros((2, 2, 2)), gt_bboxes=np.zeros(
            (1, 4))), ValueError),
        (dict(patch_score=np.zeros((2, 2)), gt_bboxes=np.zeros(
            (1, 5))), ValueError),
        (dict(patch_score=np.zeros(
            (2, 2)), gt_bboxes=[[5., 0., 1., 1.]]), ValueError),
        # a 14x14 map is not the patch grid of a 64x64 input with p=16
        (dict(
            patch_score=np.zeros((14, 14)),
            gt_bboxes=np.zeros((1, 4)),
            img_shape=(64, 64)), ValueError),
    ])
def test_bad_inputs_raise(sample, error):
    with pytest.raises(error):
        PointInBox().process(None, [sample])


def test_bad_arguments_and_empty_results():
    with pytest.raises(ValueError, match='patch_size'):
        PointInBox(patch_size=0)
    with pytest.raises(ValueError, match='no images'):
        PointInBox().compute_metrics([])


def test_registered_for_hosts():
    from mmengine.registry import METRICS
    metric = METRICS.build(dict(type='mmlocat.PointInBox', patch_size=8))
    assert isinstance(metric, PointInBox) and metric.patch_size == 8
