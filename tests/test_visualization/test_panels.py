import cv2
import numpy as np

from mmlocat.visualization import colorize_labels, heatmap_overlay, save_panels


def test_heatmap_overlay():
    img = np.zeros((32, 48, 3), np.uint8)
    heat = np.array([[0., 1., 2.], [3., 4., 5.]])
    out = heatmap_overlay(img, heat, alpha=1.0)
    assert out.shape == (32, 48, 3) and out.dtype == np.uint8
    # jet: the minimum cell is blue, the maximum cell red (nearest upsample)
    assert out[0, 0, 2] > out[0, 0, 0] and out[-1, -1, 0] > out[-1, -1, 2]
    # each 16x16 cell is one colour
    assert (out[:16, :16] == out[0, 0]).all()
    flat = heatmap_overlay(img, np.ones((2, 3)), alpha=0.5)  # no NaN
    assert np.isfinite(flat).all()
    assert (flat == flat[0, 0]).all()


def test_colorize_labels():
    palette = [[10, 20, 30], [40, 50, 60]]
    labels = np.array([[0, 1], [255, 1]])
    out = colorize_labels(labels, palette)
    assert out[0, 0].tolist() == [10, 20, 30]
    assert out[0, 1].tolist() == [40, 50, 60]
    assert out[1, 0].tolist() == [0, 0, 0]  # ignore


def test_save_panels(tmp_path):
    img = np.full((20, 30, 3), 200, np.uint8)
    out_file = str(tmp_path / 'panels.png')
    save_panels([('a', img), ('b', img), ('c', img)], out_file, title='t')
    png = cv2.imread(out_file)
    assert png is not None
    assert png.shape[1] > png.shape[0]  # panels side by side
