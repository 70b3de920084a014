"""mmlocat.visualization.class_palette: the one palette rule."""
import numpy as np
import pytest

from mmlocat.visualization import class_palette


def test_host_palette_used_when_it_has_enough_rows():
    palette = [(1, 2, 3), (4, 5, 6), (7, 8, 9)]
    assert class_palette(2, palette) == [[1, 2, 3], [4, 5, 6]]
    # too short: not these classes' colours
    assert class_palette(4, palette) == class_palette(4)


def test_without_palette_mmseg_colours_a_dataset_without_one():
    """The colours mmseg's own dataset gives classes without a palette."""
    from mmseg.datasets import BaseSegDataset
    classes = tuple(f'c{i}' for i in range(7))
    dataset = BaseSegDataset(
        metainfo=dict(classes=classes), lazy_init=True, data_root='')
    state = np.random.get_state()[1].copy()
    assert class_palette(7) == [list(c) for c in dataset.metainfo['palette']]
    # a local generator: numpy's global state is untouched
    np.testing.assert_array_equal(np.random.get_state()[1], state)
    assert class_palette(0) == []


@pytest.mark.parametrize('bad', [-1, 2.0, True, '3'])
def test_bad_number_of_classes(bad):
    with pytest.raises(ValueError, match='num_classes must be an int >= 0'):
        class_palette(bad)
