"""mmlocat.SegLegendVisualizer: mmseg's picture plus a legend strip."""
import time

import cv2
import numpy as np
import pytest
import torch
from mmengine.structures import PixelData
from mmseg.structures import SegDataSample
from mmseg.visualization import SegLocalVisualizer

from mmlocat.visualization import SegLegendVisualizer, class_palette
from mmlocat.visualization.labels import region_label_boxes


def _name():
    return f'vis-{time.perf_counter_ns()}'


def _sample(labels):
    sample = SegDataSample()
    sample.pred_sem_seg = PixelData(data=torch.as_tensor(labels)[None])
    return sample


def _draw(visualizer,
          img,
          sample,
          out_file,
          classes,
          palette,
          with_labels=True):
    visualizer.set_dataset_meta(classes, palette)
    visualizer.add_datasample(
        'x',
        img,
        sample,
        draw_gt=False,
        out_file=str(out_file),
        with_labels=with_labels)
    return cv2.imread(str(out_file))[..., ::-1]


def _outside_boxes(labels, classes):
    """True where no region label of :func:`region_label_boxes` is."""
    keep = np.ones(labels.shape, bool)
    for *_, (x0, y0, x1, y1) in region_label_boxes(labels, classes):
        keep[y0:y1 + 1, x0:x1 + 1] = False
    return keep


@pytest.fixture
def scene():
    img = np.random.RandomState(0).randint(0, 255, (120, 160, 3), np.uint8)
    labels = np.zeros((120, 160), np.int64)
    labels[:, 60:] = 2  # the largest
    labels[:40, :40] = 1
    classes = ['sky', 'cat', 'road', 'unused']
    return img, _sample(labels), classes, class_palette(4)


def test_host_picture_then_legend(scene, tmp_path):
    img, sample, classes, palette = scene
    # the host's masks; the region labels are mmlocat's (issue 36)
    host = _draw(
        SegLocalVisualizer(name=_name()),
        img,
        sample,
        tmp_path / 'h.png',
        classes,
        palette,
        with_labels=False)
    ours = _draw(
        SegLegendVisualizer(name=_name()), img, sample, tmp_path / 'o.png',
        classes, palette)
    assert ours.shape[0] == host.shape[0] and ours.shape[1] > host.shape[1]
    keep = _outside_boxes(sample.pred_sem_seg.data[0].numpy(), classes)
    assert 0 < keep.sum() < keep.size
    np.testing.assert_array_equal(ours[:, :host.shape[1]][keep], host[keep])
    strip = ours[:, host.shape[1]:].reshape(-1, 3)
    colours = {tuple(c) for c in strip}
    # a swatch for each present class, none for the absent one
    for label in (0, 1, 2):
        assert tuple(palette[label]) in colours
    assert tuple(palette[3]) not in colours
    # largest area first: road's swatch above sky's above cat's
    rows = ours[:, host.shape[1]:]

    def first_row(label):
        hit = (rows == np.array(palette[label], np.uint8)).all(-1)
        return int(np.argmax(hit.any(1)))

    assert first_row(2) < first_row(0) < first_row(1)
    # legend=False: exactly the host's picture
    plain = _draw(
        SegLegendVisualizer(name=_name(), legend=False), img, sample,
        tmp_path / 'p.png', classes, palette)
    np.testing.assert_array_equal(
        plain,
        _draw(
            SegLocalVisualizer(name=_name()), img, sample, tmp_path / 'h2.png',
            classes, palette))


def test_more_classes_than_rows(tmp_path):
    """A 40-pixel panel fits two rows: one class and '+N more'."""
    labels = np.arange(40 * 48).reshape(40, 48) % 6
    img = np.zeros((40, 48, 3), np.uint8)
    palette = class_palette(6)
    ours = _draw(
        SegLegendVisualizer(name=_name()), img, _sample(labels),
        tmp_path / 'o.png', [f'c{i}' for i in range(6)], palette)
    strip = ours[:, 48:].reshape(-1, 3)
    swatches = {tuple(c) for c in palette} & {tuple(c) for c in strip}
    assert len(swatches) == 1


def test_built_from_a_host_config(tmp_path):
    """The type mmlocat's segmentation configs name, from mmseg's scope."""
    from mmengine.registry import VISUALIZERS, init_default_scope
    init_default_scope('mmseg')
    vis = VISUALIZERS.build(
        dict(
            type='mmlocat.SegLegendVisualizer',
            name=_name(),
            vis_backends=[dict(type='LocalVisBackend')],
            save_dir=str(tmp_path)))
    assert type(vis) is SegLegendVisualizer and vis.legend


def _split_scene():
    """64x64: 'sky' in two parts left and right (its centroid is on the
    'wall' between them), a small 'lamp' in a corner."""
    labels = np.zeros((64, 64), np.int64)
    labels[:, :14] = 1
    labels[:, 50:] = 1
    labels[20:44, 14:50] = 2
    labels[0:6, 56:64] = 3
    return labels, ['wall', 'sky', 'floor', 'lamp']


def test_region_labels_on_their_own_region_inside_the_image():
    labels, names = _split_scene()
    ys, xs = np.nonzero(labels == 1)
    assert labels[int(ys.mean()), int(xs.mean())] != 1  # centroid: wall
    boxes = region_label_boxes(labels, names)
    assert {b[0] for b in boxes} >= {0, 1, 2}
    for label, text, (x, y), (x0, y0, x1, y1) in boxes:
        assert text == names[label]
        assert labels[y, x] == label  # the anchor is its own pixel
        assert 0 <= x0 <= x <= x1 < 64 and 0 <= y0 <= y <= y1 < 64
        # mostly its own class under it
        assert (labels[y0:y1 + 1, x0:x1 + 1] == label).mean() >= 0.5
    # the lamp (8x6 pixels) cannot hold its name: the legend names it
    assert 3 not in {b[0] for b in boxes}
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            a0, a1 = a[3], b[3]
            assert (a0[2] < a1[0] or a1[2] < a0[0] or a0[3] < a1[1]
                    or a1[3] < a0[1]), (a, b)


def test_small_picture_labels_only_in_their_boxes(tmp_path):
    """On a 64x64 picture the panel is the host's masks except inside the
    placed label boxes, each of which has its name drawn (the host's
    labels at a widest row's pixel are gone)."""
    labels, names = _split_scene()
    img = np.full((64, 64, 3), 128, np.uint8)
    palette = class_palette(len(names))
    masks = _draw(
        SegLocalVisualizer(name=_name()),
        img,
        _sample(labels),
        tmp_path / 'h.png',
        names,
        palette,
        with_labels=False)
    ours = _draw(
        SegLegendVisualizer(name=_name()), img, _sample(labels),
        tmp_path / 'o.png', names, palette)[:, :64]
    keep = _outside_boxes(labels, names)
    np.testing.assert_array_equal(ours[keep], masks[keep])
    for *_, (x0, y0, x1, y1) in region_label_boxes(labels, names):
        box = (slice(y0, y1 + 1), slice(x0, x1 + 1))
        assert (ours[box] != masks[box]).any()
