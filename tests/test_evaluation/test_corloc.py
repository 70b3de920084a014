"""CorLoc: exact values on hand-made score maps and boxes."""
import logging

import numpy as np
import pytest
import torch
from mmengine.logging import MMLogger

from mmlocat.evaluation import CorLoc
from mmlocat.evaluation.metrics.corloc import (foreground_mask,
                                               largest_component_box,
                                               seed_cell, seed_component_box)
from mmlocat.evaluation.metrics.loc_utils import box_iou


def test_foreground_is_mean_plus_population_std():
    score = np.array([[0., 0.], [0., 4.]])  # mean 1, std sqrt(3) = 1.73
    np.testing.assert_array_equal(
        foreground_mask(score), [[False, False], [False, True]])
    assert not foreground_mask(np.full((3, 3), 0.7)).any()  # constant


def test_largest_component_and_connectivity():
    mask = np.zeros((6, 6), bool)
    mask[0, 0:3] = True  # A: a 3-cell bar in row 0
    mask[2, 5] = True  # D: a single cell
    mask[3:5, 3] = True  # B: 2 edge-connected cells ...
    mask[5, 4] = True  # ... plus a diagonal neighbour of (4, 3)
    mask[4, 0] = True
    mask[5, 0:2] = True  # C: an edge-connected L of 3 cells
    # 8-connectivity: A, B and C all have 3 cells; the tie goes to the
    # component met first in raster order, A.
    np.testing.assert_array_equal(largest_component_box(mask, 8), [0, 0, 3, 1])
    # 4-connectivity splits B (2 + 1 cells): A and C tie, A is first.
    np.testing.assert_array_equal(largest_component_box(mask, 4), [0, 0, 3, 1])
    mask[4, 4] = True  # B: {(3,3), (4,3), (4,4), (5,4)}, 4 cells
    np.testing.assert_array_equal(largest_component_box(mask, 8), [3, 3, 5, 6])
    np.testing.assert_array_equal(largest_component_box(mask, 4), [3, 3, 5, 6])
    diag = np.eye(4, dtype=bool)
    np.testing.assert_array_equal(largest_component_box(diag, 8), [0, 0, 4, 4])
    np.testing.assert_array_equal(
        largest_component_box(diag, 4), [0, 0, 1, 1])  # 4 singletons
    assert largest_component_box(np.zeros((3, 3), bool)) is None
    with pytest.raises(ValueError, match='connectivity'):
        largest_component_box(mask, 6)


def test_seed_component_and_connectivity():
    """LOST's box step: the component holding the seed, 4-connected by
    default (scipy.ndimage.label's default structure)."""
    mask = np.zeros((6, 6), bool)
    mask[0, 0] = mask[1, 1] = mask[2, 2] = True  # a diagonal
    mask[4, 1:6] = True  # a larger bar
    np.testing.assert_array_equal(
        seed_component_box(mask, (1, 1)), [1, 1, 2, 2])
    np.testing.assert_array_equal(
        seed_component_box(mask, (1, 1), 8), [0, 0, 3, 3])
    np.testing.assert_array_equal(
        seed_component_box(mask, (4, 3)), [1, 4, 6, 5])
    assert seed_component_box(mask, (5, 5)) is None  # background seed
    with pytest.raises(ValueError, match='connectivity'):
        seed_component_box(mask, (1, 1), 6)
    score = np.zeros((3, 4))
    score[1, 2] = score[2, 0] = 5.  # ties: the first in raster order
    assert seed_cell(score) == (1, 2)


def test_seed_and_largest_rules_give_different_boxes():
    score = np.zeros((8, 8))
    score[0, 0] = 3.0  # the peak, a single cell
    score[5:8, 2:8] = 1.0  # the largest component
    seed, largest = CorLoc(), CorLoc(component='largest')
    np.testing.assert_array_equal(seed.predict_box(score), [0, 0, 16, 16])
    np.testing.assert_array_equal(
        largest.predict_box(score), [32, 80, 128, 128])


def test_predicted_box_is_largest_component_in_pixels():
    score = np.zeros((10, 10))
    score[2:5, 3:7] = 1.0  # 12 cells: cells x 3..7, y 2..5
    score[8, 8] = 1.0  # a smaller far-away blob
    metric = CorLoc(patch_size=16)
    np.testing.assert_array_equal(
        metric.predict_box(score), [48., 32., 112., 80.])
    # ceil grids (adaptive padding) are clipped to the input
    score = np.zeros((10, 10))
    score[4:, 7:] = 1.0
    np.testing.assert_array_equal(
        metric.predict_box(score, img_shape=(150, 150)),
        [112., 64., 150., 150.])


def test_corloc_values():
    blob = np.zeros((10, 10))
    blob[2:5, 3:7] = 1.0  # predicted box [48, 32, 112, 80], area 3072
    samples = [
        # IoU([48,32,112,80], [50,30,110,82]) = 2880 / 3312 = 0.87 -> hit
        dict(
            patch_score=torch.from_numpy(blob),
            gt_bboxes=np.array([[0., 0., 10., 10.], [50., 30., 110., 82.]]),
            img_shape=(160, 160)),
        # only a far box -> miss
        dict(
            patch_score=torch.from_numpy(blob),
            gt_bboxes=np.array([[120., 120., 160., 160.]]),
            img_shape=(160, 160)),
        # constant map: no foreground -> miss
        dict(
            patch_score=torch.zeros(10, 10),
            gt_bboxes=np.array([[0., 0., 160., 160.]]),
            img_shape=(160, 160)),
    ]
    np.testing.assert_allclose(
        box_iou(np.array([48., 32., 112., 80.]), samples[0]['gt_bboxes'])[1],
        2880 / 3312)
    metric = CorLoc(patch_size=16)
    metric.process(None, samples)
    result = metric.evaluate(3)
    assert result['corloc/num_images'] == 3
    assert result['corloc/CorLoc'] == pytest.approx(1 / 3)
    assert result['corloc/num_no_foreground'] == 1
    assert result['corloc/num_without_gt'] == 0


def test_images_without_gt_are_counted_misses_and_named():
    blob = np.zeros((4, 4))
    blob[0, 0] = 1.0
    samples = [
        dict(patch_score=blob, gt_bboxes=np.zeros((0, 4)), img_path=name)
        for name in ('x/a.jpg', 'x/b.jpg')
    ] + [dict(patch_score=blob, gt_bboxes=np.array([[0., 0., 16., 16.]]))]
    metric = CorLoc(patch_size=16)
    metric.process(None, samples)
    # mmengine's logger does not propagate to caplog
    handler = logging.Handler()
    records = []
    handler.emit = records.append
    logger = MMLogger.get_current_instance()
    logger.addHandler(handler)
    try:
        result = metric.compute_metrics(metric.results)
    finally:
        logger.removeHandler(handler)
    assert result['num_images'] == 3 and result['num_without_gt'] == 2
    assert result['CorLoc'] == pytest.approx(1 / 3)
    text = ' '.join(r.getMessage() for r in records
                    if r.levelno == logging.WARNING)
    assert '2 of 3 images have no ground-truth box' in text
    assert 'x/a.jpg' in text and 'x/b.jpg' in text


def test_iou_threshold_is_inclusive():
    score = np.zeros((4, 4))
    score[0, 0:2] = 1.0  # box [0, 0, 32, 16]; IoU with [0,0,16,16] = 0.5
    sample = dict(patch_score=score, gt_bboxes=np.array([[0., 0., 16., 16.]]))
    for thr, expected in ((0.5, 1.0), (0.51, 0.0)):
        metric = CorLoc(iou_thr=thr)
        metric.process(None, [sample])
        assert metric.evaluate(1)['corloc/CorLoc'] == expected


def test_connectivity_changes_the_box():
    score = np.zeros((6, 6))
    score[0, 0] = score[1, 1] = score[2, 2] = 1.0  # a diagonal
    score[4, 4] = score[4, 5] = 1.0  # a 2-cell bar
    gt = np.array([[0., 0., 48., 48.]])  # the diagonal's box
    hits = {}
    for conn in (4, 8):
        metric = CorLoc(connectivity=conn)
        metric.process(None, [dict(patch_score=score, gt_bboxes=gt)])
        hits[conn] = metric.evaluate(1)['corloc/CorLoc']
    assert hits == {8: 1.0, 4: 0.0}


@pytest.mark.parametrize('kwargs', [
    dict(patch_size=-1),
    dict(connectivity=6),
    dict(component='biggest'),
    dict(iou_thr=0.0),
    dict(iou_thr=1.5)
])
def test_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        CorLoc(**kwargs)


def test_bad_inputs():
    with pytest.raises(ValueError, match='NaN'):
        CorLoc().process(None, [
            dict(
                patch_score=torch.tensor([[float('nan'), 0.]]),
                gt_bboxes=np.zeros((1, 4)))
        ])
    with pytest.raises(KeyError, match='patch_score'):
        CorLoc().process(None, [dict(gt_bboxes=np.zeros((1, 4)))])
    with pytest.raises(ValueError, match='patch grid'):
        CorLoc(patch_size=8).process(None, [
            dict(
                patch_score=np.zeros((4, 4)),
                gt_bboxes=np.zeros((1, 4)),
                img_shape=(64, 64))
        ])


def test_images_per_second_from_process_times(monkeypatch):
    """Images after the first batch over the first-to-last batch time."""
    from mmlocat.evaluation.metrics import corloc as corloc_module
    clock = iter([10.0, 12.0, 14.0])
    monkeypatch.setattr(corloc_module.time, 'perf_counter',
                        lambda: next(clock))
    metric = corloc_module.CorLoc(patch_size=16)
    sample = dict(
        patch_score=np.zeros((2, 2)), gt_bboxes=np.array([[0, 0, 8, 8.]]))
    metric.process({}, [sample, sample])  # t = 10: not counted
    metric.process({}, [sample, sample])  # t = 12
    metric.process({}, [sample])  # t = 14
    res = metric.compute_metrics(metric.results)
    assert res['images_per_s'] == pytest.approx(3 / 4.)
    one = corloc_module.CorLoc(patch_size=16)
    one.results = metric.results[:2]  # a single batch: no speed
    assert 'images_per_s' not in one.compute_metrics(one.results)
    # Two ranks: per-rank rates add up.
    rows = [
        dict(hit=True, time=t, rank=r)
        for r, t in [(0, 0.), (0, 1.), (1, 5.), (1, 5.5), (1, 6.)]
    ]
    assert corloc_module.images_per_second(rows) == pytest.approx(1 + 2)
