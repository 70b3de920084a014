"""mmlocat.visualization.predictions: the PNGs of tools/infer.py."""
import cv2
import numpy as np

from mmlocat.visualization import (draw_classification, draw_detection,
                                   draw_segmentation, label_colors)


def _img():
    return np.random.RandomState(0).randint(0, 255,
                                            (40, 60, 3)).astype(np.uint8)


def test_label_colors():
    palette = [[1, 2, 3], [4, 5, 6]]
    assert label_colors(2, palette).tolist() == palette
    cycled = label_colors(25)  # palette too short: tab20, cycled
    assert cycled.shape == (25, 3) and (cycled[0] == cycled[20]).all()
    assert len({tuple(c) for c in cycled[:20]}) == 20


def test_draw_all(tmp_path):
    img = _img()
    out = str(tmp_path / 'cls.png')
    draw_classification(
        img,
        np.array([.1, .5, .2, .05, .1, .05]),
        out,
        classes=list('abcdef'),
        topk=3)
    assert cv2.imread(out) is not None
    out = str(tmp_path / 'seg.png')
    labels = np.zeros((40, 60), np.int64)
    labels[10:, 20:] = 3
    draw_segmentation(img, labels, out, classes=['w', 'x', 'y', 'z'])
    assert cv2.imread(out) is not None
    out = str(tmp_path / 'det.png')
    drawn = draw_detection(
        img,
        np.array([[1, 2, 30, 20], [5, 5, 50, 35], [0, 0, 10, 10]]),
        np.array([0, 1, 1]),
        np.array([0.9, 0.4, 0.1]),
        out,
        classes=['cat', 'remote control'],
        score_thr=0.3)
    assert drawn == 2 and cv2.imread(out) is not None
    assert draw_detection(img, np.zeros((0, 4)), np.zeros(0, int), np.zeros(0),
                          out) == 0
