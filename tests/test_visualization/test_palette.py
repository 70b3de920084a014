"""mmlocat.visualization.class_palette: the one palette rule."""
import cv2
import numpy as np
import pytest

from mmlocat.visualization import class_palette


def _closest_pair(colors) -> float:
    """The CIELAB distance of the two closest colours."""
    lab = cv2.cvtColor(
        np.asarray(colors, np.float32).reshape(-1, 1, 3) / 255.0,
        cv2.COLOR_RGB2LAB).reshape(-1, 3)
    distance = np.linalg.norm(lab[:, None] - lab[None], axis=2)
    return distance[~np.eye(len(colors), dtype=bool)].min()


def test_host_palette_used_when_it_has_enough_rows():
    palette = [(1, 2, 3), (4, 5, 6), (7, 8, 9)]
    assert class_palette(2, palette) == [[1, 2, 3], [4, 5, 6]]
    # too short: not these classes' colours
    assert class_palette(4, palette) == class_palette(4)


def test_mmseg_fallback_colours_as_mmseg_a_dataset_without_palette():
    """The colours mmseg's own dataset gives classes without a palette."""
    from mmseg.datasets import BaseSegDataset
    classes = tuple(f'c{i}' for i in range(7))
    dataset = BaseSegDataset(
        metainfo=dict(classes=classes), lazy_init=True, data_root='')
    state = np.random.get_state()[1].copy()
    assert class_palette(
        7, fallback='mmseg') == [list(c) for c in dataset.metainfo['palette']]
    # a local generator: numpy's global state is untouched
    np.testing.assert_array_equal(np.random.get_state()[1], state)
    assert class_palette(0) == [] == class_palette(0, fallback='mmseg')


@pytest.mark.parametrize('num_classes', [2, 10, 50, 150])
def test_distinct_fallback_is_far_apart_stable_and_not_white(num_classes):
    colors = class_palette(num_classes)
    mmseg = class_palette(num_classes, fallback='mmseg')
    assert len(colors) == num_classes
    assert len({tuple(c) for c in colors}) == num_classes
    assert all(0 <= v <= 255 and isinstance(v, int) for c in colors for v in c)
    assert _closest_pair(colors) > max(15.0, 2 * _closest_pair(mmseg))
    assert _closest_pair(colors + [[255] * 3, [0] * 3]) > 15.0
    # adding classes never recolours the first ones
    assert class_palette(num_classes + 5)[:num_classes] == colors


@pytest.mark.parametrize('bad', [-1, 2.0, True, '3'])
def test_bad_number_of_classes(bad):
    with pytest.raises(ValueError, match='num_classes must be an int >= 0'):
        class_palette(bad)
    with pytest.raises(ValueError, match="fallback must be one of"):
        class_palette(2, fallback='random')
