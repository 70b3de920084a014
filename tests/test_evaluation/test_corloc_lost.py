"""CorLoc's defaults against LOST's evaluation, transcribed in
``tests/helpers/lost_reference.py`` from github valeoai/LOST.

Crafted patch-score maps at VOC / COCO image sizes (not multiples of 16,
so the padded cells are clipped), with ground truth written as VOC XML /
COCO JSON and read by mmlocat's own datasets: the boxes, the per-image hit
decisions and CorLoc must be LOST's; the IoU decision is also compared on
random box pairs.
"""
import json
import math
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import torch
from helpers.lost_reference import (lost_box, lost_coco_gt, lost_corloc,
                                    lost_iou, lost_voc_gt)
from scipy import ndimage

from mmlocat.datasets import CocoBoxesDataset, parse_loc_xml
from mmlocat.evaluation import CorLoc
from mmlocat.evaluation.metrics.loc_utils import box_iou

SIZES = [(375, 500), (500, 375), (333, 500), (500, 333), (480, 640),
         (427, 640), (640, 480), (281, 500), (100, 100), (224, 224)]


def _score_map(rng, rows, cols, kind):
    """float32 maps of four kinds: blobs, diagonal chains (4- vs
    8-connectivity), plateaus whose peak is not in the largest one (seed
    vs largest), plain noise (many small components)."""
    score = 0.3 * rng.random((rows, cols))
    yy, xx = np.mgrid[:rows, :cols]
    if kind == 0:
        for _ in range(int(rng.integers(1, 5))):
            cy, cx = rng.random(2) * (rows, cols)
            sigma = rng.uniform(0.8, max(1.0, min(rows, cols) / 4))
            score += rng.uniform(0.5, 2) * np.exp(-((yy - cy)**2 +
                                                    (xx - cx)**2) /
                                                  (2 * sigma**2))
    elif kind == 1:
        for _ in range(int(rng.integers(1, 4))):
            r, c = int(rng.integers(rows)), int(rng.integers(cols))
            step = 1 if rng.random() < 0.5 else -1
            for k in range(int(rng.integers(3, 10))):
                if 0 <= r + k < rows and 0 <= c + step * k < cols:
                    score[r + k, c + step * k] += rng.uniform(1, 2)
    elif kind == 2:
        for height in rng.uniform(1, 2, size=int(rng.integers(2, 4))):
            r0, c0 = int(rng.integers(rows)), int(rng.integers(cols))
            r1 = r0 + int(rng.integers(1, max(2, rows // 2)))
            c1 = c0 + int(rng.integers(1, max(2, cols // 2)))
            score[r0:r1, c0:c1] = height + 0.05 * rng.random()
    else:
        score = rng.random((rows, cols))
    return score.astype(np.float32)


def _component_box(rng, score, hw):
    """A pixel box around a random foreground component (some
    8-connected, some 4-connected), jittered: hits and near-misses."""
    mask = score > score.mean() + score.std()
    structure = ndimage.generate_binary_structure(2, int(rng.integers(1, 3)))
    labels, num = ndimage.label(mask, structure=structure)
    if num == 0:
        return None
    rows, cols = np.nonzero(labels == int(rng.integers(1, num + 1)))
    box = np.array([cols.min(),
                    rows.min(),
                    cols.max() + 1,
                    rows.max() + 1]) * 16.
    return box + rng.normal(0, 10, size=4)


def _voc_objects(rng, score, hw):
    """1-4 objects as VOC XML strings: 1-based inclusive integers."""
    height, width = hw
    objects = []
    for k in range(int(rng.integers(1, 5))):
        box = _component_box(rng, score, hw) if k == 0 else None
        if box is None:
            box = np.sort(rng.uniform(0, width, 2)).tolist() + np.sort(
                rng.uniform(0, height, 2)).tolist()
            box = [box[0], box[2], box[1], box[3]]
        x1 = int(np.clip(round(box[0]) + 1, 1, width))
        y1 = int(np.clip(round(box[1]) + 1, 1, height))
        x2 = int(np.clip(round(box[2]), x1, width))
        y2 = int(np.clip(round(box[3]), y1, height))
        objects.append(
            dict(xmin=str(x1), ymin=str(y1), xmax=str(x2), ymax=str(y2)))
    return objects


def _write_voc_xml(path, hw, objects):
    root = ET.Element('annotation')
    size = ET.SubElement(root, 'size')
    ET.SubElement(size, 'width').text = str(hw[1])
    ET.SubElement(size, 'height').text = str(hw[0])
    for obj in objects:
        node = ET.SubElement(root, 'object')
        ET.SubElement(node, 'difficult').text = '1'  # LOST counts them too
        bndbox = ET.SubElement(node, 'bndbox')
        for key, value in obj.items():
            ET.SubElement(bndbox, key).text = value
    ET.ElementTree(root).write(str(path))


def voc_cases(tmp_path, num, seed):
    """``(score, LOST's gt, mmlocat's gt, (H, W))`` per crafted image."""
    rng = np.random.default_rng(seed)
    cases = []
    for i in range(num):
        hw = SIZES[i % len(SIZES)]
        score = _score_map(rng, math.ceil(hw[0] / 16), math.ceil(hw[1] / 16),
                           i % 4)
        objects = _voc_objects(rng, score, hw)
        xml = tmp_path / f'{i:05d}.xml'
        _write_voc_xml(xml, hw, objects)
        ours, size = parse_loc_xml(str(xml))
        assert size == hw
        cases.append((score, lost_voc_gt(objects), ours, hw))
    return cases


def _ours(cases, **kwargs):
    metric = CorLoc(patch_size=16, **kwargs)
    metric.process(None, [
        dict(
            patch_score=torch.from_numpy(score),
            gt_bboxes=gt,
            img_shape=hw,
            img_path=f'{i}.jpg') for i, (score, _, gt, hw) in enumerate(cases)
    ])
    hits = np.array([r['hit'] for r in metric.results])
    return metric.compute_metrics(metric.results), hits


@pytest.fixture(scope='module')
def voc(tmp_path_factory):
    return voc_cases(tmp_path_factory.mktemp('voc_xml'), 1200, seed=0)


def test_boxes_and_decisions_equal_lost_on_crafted_voc_maps(voc):
    metric = CorLoc(patch_size=16)
    for score, _, _, hw in voc:
        np.testing.assert_array_equal(
            metric.predict_box(score.astype(np.float64), hw),
            lost_box(score.astype(np.float64), 16, hw))
    ref_corloc, ref_hits = lost_corloc([(s.astype(np.float64), gt, hw)
                                        for s, gt, _, hw in voc])
    result, hits = _ours(voc)
    mismatches = np.flatnonzero(hits != ref_hits)
    assert mismatches.size == 0, mismatches[:10]
    assert result['CorLoc'] == ref_corloc
    assert result['num_images'] == len(voc)
    assert result['num_without_gt'] == result['num_no_foreground'] == 0
    # the crafted maps are neither all hits nor all misses
    assert 0.2 < ref_corloc < 0.8


@pytest.mark.parametrize('kwargs', [
    dict(component='largest', connectivity=8),
    dict(component='seed', connectivity=8),
    dict(component='largest', connectivity=4),
])
def test_other_box_rules_are_not_lost(voc, kwargs):
    """The options change decisions on these maps: the test above would
    catch an implementation of another rule."""
    _, ref_hits = lost_corloc([(s.astype(np.float64), gt, hw)
                               for s, gt, _, hw in voc])
    _, hits = _ours(voc, **kwargs)
    assert (hits != ref_hits).sum() >= 10


def _random_pairs(rng, num):
    """Predicted boxes on the 16-px grid clipped to the image, integer GT
    boxes: a third built to have an IoU of exactly or nearly 0.5, a third
    jittered copies, a third random."""
    pairs = []
    for i in range(num):
        height, width = SIZES[i % len(SIZES)]
        c0, c1 = np.sort(rng.integers(0, math.ceil(width / 16) + 1, 2))
        r0, r1 = np.sort(rng.integers(0, math.ceil(height / 16) + 1, 2))
        c1, r1 = max(c1, c0 + 1), max(r1, r0 + 1)
        pred = np.array(
            [16 * c0, 16 * r0,
             min(16 * c1, width),
             min(16 * r1, height)])
        if i % 3 == 0:  # half the area inside: IoU 0.5 (or near it)
            w, h = pred[2] - pred[0], pred[3] - pred[1]
            gt = [pred[0], pred[1], pred[0] + max(1, w // 2), pred[3]]
            if h > 1 and i % 2:
                gt = [pred[0], pred[1], pred[2], pred[1] + h // 2]
            gt = np.array([gt]) + rng.integers(-1, 2, size=(1, 4))
            gt[:, 2:] = np.maximum(gt[:, 2:], gt[:, :2])
        elif i % 3 == 1:  # a jittered copy: IoUs around 0.5
            w, h = pred[2] - pred[0], pred[3] - pred[1]
            gt = pred[None] + np.round(
                rng.normal(0, 0.25, 4) * [w, h, w, h]).astype(np.int64)
            gt[:, 0::2] = np.clip(gt[:, 0::2], 0, width)
            gt[:, 1::2] = np.clip(gt[:, 1::2], 0, height)
            gt[:, 2:] = np.maximum(gt[:, 2:], gt[:, :2])
        else:
            x = np.sort(rng.integers(0, width + 1, (rng.integers(1, 4), 2)))
            y = np.sort(rng.integers(0, height + 1, (len(x), 2)))
            gt = np.stack([x[:, 0], y[:, 0], x[:, 1], y[:, 1]], axis=1)
        pairs.append((pred.astype(np.int64), gt.astype(np.int64)))
    return pairs


def test_iou_decisions_equal_lost_on_random_boxes():
    rng = np.random.default_rng(1)
    pairs = _random_pairs(rng, 20000)
    ours = np.array(
        [box_iou(p.astype(np.float64), g).max() >= 0.5 for p, g in pairs])
    ref = np.array([
        bool(
            torch.any(
                lost_iou(torch.from_numpy(p), torch.from_numpy(g)) >= 0.5))
        for p, g in pairs
    ])
    assert (ours != ref).sum() == 0
    # IoU exactly 0.5 is a hit for both, and the sample has many of them
    exact = [
        i for i, (p, g) in enumerate(pairs)
        if np.isclose(box_iou(p.astype(np.float64), g).max(), 0.5, atol=0)
    ]
    assert len(exact) > 100 and ref[exact].all()
    near = [
        i for i, (p, g) in enumerate(pairs)
        if abs(box_iou(p.astype(np.float64), g).max() - 0.5) < 0.05
    ]
    assert len(near) > 1000 and 0.2 < ref.mean() < 0.8


def _coco_json(rng, path, num):
    images, anns, scores = [], [], []
    for i in range(num):
        height, width = SIZES[i % len(SIZES)]
        images.append(
            dict(
                id=i + 1, file_name=f'{i:05d}.jpg', height=height,
                width=width))
        score = _score_map(rng, math.ceil(height / 16), math.ceil(width / 16),
                           i % 4)
        scores.append(score)
        for k in range(int(rng.integers(1, 5))):
            box = _component_box(rng, score, (height, width))
            if box is None or k:
                x, y = rng.uniform(0, width - 2), rng.uniform(0, height - 2)
                w, h = rng.uniform(1, width - x), rng.uniform(1, height - y)
            else:  # a patch-grid box may reach past the image: clipped,
                # as COCO's boxes lie in their image (others are refused)
                x = min(max(box[0], 0.), width - 1.)
                y = min(max(box[1], 0.), height - 1.)
                w = max(min(box[2], width) - x, 1.)
                h = max(min(box[3], height) - y, 1.)
            if k == 1 and i % 5 == 0:  # exact halves: Python rounds to even
                x, w = float(int(x)) + 0.5, float(int(w)) + 0.5
            anns.append(
                dict(
                    id=len(anns) + 1,
                    image_id=i + 1,
                    category_id=1,
                    bbox=[x, y, w, h],
                    iscrowd=int(k == 3 and i % 2 == 0),
                    area=w * h))
    path.write_text(
        json.dumps(
            dict(
                images=images,
                annotations=anns,
                categories=[dict(id=1, name='thing')])))
    return images, anns, scores


def test_coco20k_rounding_crowd_and_decisions_equal_lost(tmp_path):
    rng = np.random.default_rng(2)
    images, anns, scores = _coco_json(rng, tmp_path / 'coco.json', 600)
    dataset = CocoBoxesDataset(
        ann_file=str(tmp_path / 'coco.json'), round_boxes=True)
    assert len(dataset) == len(images)
    cases = []
    for i, img in enumerate(images):
        ref_gt = lost_coco_gt([a for a in anns if a['image_id'] == img['id']])
        ours_gt = dataset.get_data_info(i)['gt_bboxes']
        np.testing.assert_array_equal(ours_gt, ref_gt)
        hw = (img['height'], img['width'])
        assert tuple(dataset.get_data_info(i)['ann_img_shape']) == hw
        cases.append((scores[i], ref_gt, ours_gt, hw))
    ref_corloc, ref_hits = lost_corloc([(s.astype(np.float64), gt, hw)
                                        for s, gt, _, hw in cases])
    result, hits = _ours(cases)
    assert (hits != ref_hits).sum() == 0
    assert result['CorLoc'] == ref_corloc
    # half-way corners were written; LOST rounds them to even
    assert any(a['bbox'][0] % 1 == 0.5 for a in anns)
    floats = CocoBoxesDataset(ann_file=str(tmp_path / 'coco.json'))
    assert any((floats.get_data_info(i)['gt_bboxes'] % 1 != 0).any()
               for i in range(len(floats)))
