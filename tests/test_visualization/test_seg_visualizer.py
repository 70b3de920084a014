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


def _name():
    return f'vis-{time.perf_counter_ns()}'


def _sample(labels):
    sample = SegDataSample()
    sample.pred_sem_seg = PixelData(data=torch.as_tensor(labels)[None])
    return sample


def _draw(visualizer, img, sample, out_file, classes, palette):
    visualizer.set_dataset_meta(classes, palette)
    visualizer.add_datasample(
        'x', img, sample, draw_gt=False, out_file=str(out_file))
    return cv2.imread(str(out_file))[..., ::-1]


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
    host = _draw(
        SegLocalVisualizer(name=_name()), img, sample, tmp_path / 'h.png',
        classes, palette)
    ours = _draw(
        SegLegendVisualizer(name=_name()), img, sample, tmp_path / 'o.png',
        classes, palette)
    assert ours.shape[0] == host.shape[0] and ours.shape[1] > host.shape[1]
    np.testing.assert_array_equal(ours[:, :host.shape[1]], host)
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
    np.testing.assert_array_equal(plain, host)


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
