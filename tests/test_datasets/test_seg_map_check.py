"""CheckSegMap on its own: what it compares, refuses and resizes."""
import numpy as np
import pytest
from mm_warnings import logged_warnings

from mmlocat.datasets import CheckSegMap, DataFileError


def results(label_hw, image_hw=(8, 12), value=1):
    return dict(
        img_path='x.jpg',
        seg_map_path='x.png',
        ori_shape=image_hw,
        reduce_zero_label=True,
        gt_seg_map=np.full(label_hw, value, np.uint8))


def test_same_size_and_values_in_range_pass():
    out = CheckSegMap(num_classes=2)(results((8, 12)))
    assert out['gt_seg_map'].shape == (8, 12)
    ignored = results((8, 12), value=255)
    assert CheckSegMap(num_classes=2)(ignored) is ignored
    no_label = dict(img_path='x.jpg', ori_shape=(8, 12))
    assert CheckSegMap()(no_label) is no_label


def test_refused_naming_both_files_and_sizes():
    with pytest.raises(DataFileError) as err:
        CheckSegMap()(results((4, 6)))
    assert str(err.value).startswith(
        'x.png: label map is 4x6 (HxW) but its image x.jpg is 8x12; fix the '
        'annotation')
    assert err.value.fault.kind == 'size_mismatch'
    with pytest.raises(
            DataFileError,
            match=r'x.png: 96 pixel\(s\) with label values \[5\] '
            r'outside the 2 classes 0..1 and the ignore index 255 '
            r'\(values after reduce_zero_label=True\)'):
        CheckSegMap(num_classes=2)(results((8, 12), value=5))


def test_resize_is_an_explicit_counted_opt_in():
    step = CheckSegMap(size_mismatch='resize', num_classes=2)
    label = np.arange(24, dtype=np.uint8).reshape(4, 6) % 2
    res = results((4, 6))
    res['gt_seg_map'] = label
    with logged_warnings() as warned:
        out = step(res)
    # nearest neighbour at twice the size: every stored pixel becomes 2x2
    np.testing.assert_array_equal(out['gt_seg_map'],
                                  label.repeat(2, 0).repeat(2, 1))
    assert step.resized.count == 1
    assert any('label maps resized' in m and 'x.png' in m for m in warned)
    # out-of-range values are still refused
    with pytest.raises(DataFileError, match='outside the 2 classes'):
        step(results((4, 6), value=7))


def test_bad_arguments():
    with pytest.raises(ValueError, match='size_mismatch must be one of'):
        CheckSegMap('crop')
    with pytest.raises(ValueError, match='num_classes must be >= 1'):
        CheckSegMap(num_classes=0)
    assert repr(CheckSegMap()) == (
        "CheckSegMap(size_mismatch='error', num_classes=None, "
        'ignore_index=255)')
