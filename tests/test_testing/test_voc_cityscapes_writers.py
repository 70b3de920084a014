"""The tiny VOC / Cityscapes writers, read back by mmseg's own datasets."""
import numpy as np
import pytest
from mmengine.registry import init_default_scope

import mmlocat  # noqa: F401
from mmlocat.datasets.imagenet_loc import parse_loc_xml
from mmlocat.testing import generate
from mmlocat.testing.voc_cityscapes_writers import VOC_CLASSES

PIPELINE = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),
    dict(type='PackSegInputs')
]


def _build(cfg):
    from mmseg.registry import DATASETS
    init_default_scope('mmseg')
    return DATASETS.build(dict(cfg, pipeline=PIPELINE))


def test_voc_layout(tmp_path):
    paths = generate('pascal_voc', str(tmp_path), 2, 3, (40, 48))
    common = dict(
        type='PascalVOCDataset',
        data_root=paths['data_root'],
        data_prefix=dict(
            img_path='JPEGImages', seg_map_path='SegmentationClass'),
        ann_file=paths['val_split'])
    voc = _build(common)
    assert voc.metainfo['classes'][1:] == VOC_CLASSES
    values = set()
    for i in range(len(voc)):
        seg = voc[i]['data_samples'].gt_sem_seg.data.numpy()
        assert seg.shape == (1, 40, 48)
        values |= set(np.unique(seg).tolist())
    assert 0 in values and 255 in values
    assert values - {0, 255} <= {c + 1 for c in paths['active_classes']}
    # VOC20: the label map of mmseg's dataset drops background to 255.
    voc20 = _build(dict(common, metainfo=dict(classes=VOC_CLASSES)))
    seg20 = voc20[0]['data_samples'].gt_sem_seg.data.numpy()
    seg21 = voc[0]['data_samples'].gt_sem_seg.data.numpy()
    np.testing.assert_array_equal(
        seg20, np.where(seg21 == 0, 255, np.where(seg21 == 255, 255,
                                                  seg21 - 1)))
    # Boxes: the XML objects are the masks' classes.
    stem = voc[0]['data_samples'].img_path.split('/')[-1][:-4]
    boxes, size = parse_loc_xml(f'{paths["data_root"]}/Annotations/{stem}.xml')
    assert size == (40, 48)
    assert len(boxes) >= 1 and (boxes[:, 2:] > boxes[:, :2]).all()
    lines = open(f'{paths["data_root"]}/{paths["trainval_list"]}').read()
    assert len(lines.split()) == 5


def test_voc2007_and_bad_year(tmp_path):
    paths = generate('pascal_voc', str(tmp_path), 1, 1, (32, 32), year=2007)
    assert paths['data_root'].endswith('VOC2007')
    with pytest.raises(ValueError, match='2007 or 2012'):
        generate('pascal_voc', str(tmp_path / 'x'), 1, 1, (32, 32), year=2010)


def test_cityscapes_layout(tmp_path):
    paths = generate('cityscapes', str(tmp_path), 1, 2, (32, 64))
    ds = _build(
        dict(
            type='CityscapesDataset',
            data_root=paths['data_root'],
            data_prefix=dict(
                img_path=paths['val_img_dir'],
                seg_map_path=paths['val_ann_dir'])))
    assert len(ds) == 2
    sample = ds[0]
    assert sample['inputs'].shape == (3, 32, 64)
    values = set()
    for i in range(2):
        values |= set(
            np.unique(ds[i]['data_samples'].gt_sem_seg.data).tolist())
    assert values - {255} <= set(paths['active_classes'])
    assert len(values - {255}) >= 2
