"""ImageNetLocDataset / CocoBoxesDataset / ResizeEdgeWithBoxes."""
import json
import os.path as osp
import re

import cv2
import numpy as np
import pytest
from mm_warnings import logged_warnings

from mmlocat.datasets import (CocoBoxesDataset, ImageNetLocDataset,
                              ResizeEdgeWithBoxes, keep_single_small,
                              parse_loc_xml)

XML = """<annotation><filename>{name}</filename>
<size><width>{w}</width><height>{h}</height><depth>3</depth></size>
{objects}</annotation>"""
OBJ = """<object><name>n0</name><difficult>{d}</difficult><bndbox>
<xmin>{0}</xmin><ymin>{1}</ymin><xmax>{2}</xmax><ymax>{3}</ymax>
</bndbox></object>"""


def _write_xml(path, name, boxes, w=80, h=60, difficult=()):
    objects = ''.join(
        OBJ.format(*b, d=int(i in difficult)) for i, b in enumerate(boxes))
    path.write_text(XML.format(name=name, w=w, h=h, objects=objects))


def _write_img(path, w=80, h=60):
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), np.full((h, w, 3), 127, np.uint8))


@pytest.fixture
def imagenet_root(tmp_path):
    """val/<wnid>/*.JPEG + val_boxes/*.xml (80x60 images, area 4800)."""
    boxes = {
        'a': [(11, 11, 30, 30)],  # 20x20 = 400 px: single and small
        'b': [(11, 11, 30, 30), (41, 21, 60, 40)],  # two boxes
        'c': [(1, 1, 70, 50)],  # 70x50 = 3500 px > 25%
    }
    for wnid, names in (('n01', 'ab'), ('n02', 'c')):
        for name in names:
            _write_img(tmp_path / 'val' / wnid / f'{name}.JPEG')
    (tmp_path / 'val_boxes').mkdir()
    for name, bxs in boxes.items():
        _write_xml(tmp_path / 'val_boxes' / f'{name}.xml', name, bxs)
    return tmp_path


def test_parse_loc_xml(tmp_path):
    path = tmp_path / 'x.xml'
    _write_xml(path, 'x', [(1, 2, 10, 20), (5, 5, 6, 6)], difficult=(1, ))
    boxes, size = parse_loc_xml(str(path))
    assert size == (60, 80)
    np.testing.assert_array_equal(boxes, [[0, 1, 10, 20], [4, 4, 6, 6]])
    boxes, _ = parse_loc_xml(str(path), one_based=False, skip_difficult=True)
    np.testing.assert_array_equal(boxes, [[1, 2, 10, 20]])
    path.write_text('<annotation><object><bndbox><xmin>3</xmin>'
                    '</bndbox></object></annotation>')
    with pytest.raises(ValueError, match='bndbox'):
        parse_loc_xml(str(path))
    path.write_text('<annotation><object>')
    with pytest.raises(ValueError, match='cannot parse'):
        parse_loc_xml(str(path))


def test_keep_single_small():
    one = np.array([[0., 0., 10., 10.]])
    assert keep_single_small(one, (20, 21))  # 100 < 0.25 * 420
    assert not keep_single_small(one, (20, 20))  # 100 == 25%: not <
    assert not keep_single_small(np.repeat(one, 2, 0), (100, 100))
    assert not keep_single_small(np.zeros((0, 4)), (100, 100))


def test_imagenet_loc_filter_and_labels(imagenet_root):
    ds = ImageNetLocDataset(data_root=str(imagenet_root), data_prefix='val')
    assert len(ds) == 1
    info = ds.get_data_info(0)
    assert info['img_path'].endswith(osp.join('n01', 'a.JPEG'))
    assert info['gt_label'] == 0
    np.testing.assert_array_equal(info['gt_bboxes'], [[10, 10, 30, 30]])
    assert ds.metainfo['classes'] == ('n01', 'n02')

    ds = ImageNetLocDataset(
        data_root=str(imagenet_root),
        data_prefix='val',
        filter_single_small=False)
    boxes = {
        osp.basename(ds.get_data_info(i)['img_path']):
        ds.get_data_info(i)['gt_bboxes']
        for i in range(len(ds))
    }
    assert sorted(boxes) == ['a.JPEG', 'b.JPEG', 'c.JPEG']
    assert boxes['b.JPEG'].shape == (2, 4)
    assert boxes['b.JPEG'].dtype == np.float32
    # A larger area bound keeps c (3500 / 4800 = 73%) as well.
    ds = ImageNetLocDataset(
        data_root=str(imagenet_root), data_prefix='val', max_area_ratio=0.8)
    assert len(ds) == 2


def test_imagenet_loc_missing_and_bad_args(imagenet_root):
    (imagenet_root / 'val_boxes' / 'a.xml').unlink()
    with pytest.raises(FileNotFoundError, match='a.JPEG'):
        ImageNetLocDataset(data_root=str(imagenet_root), data_prefix='val')
    ds = ImageNetLocDataset(
        data_root=str(imagenet_root),
        data_prefix='val',
        missing_boxes='skip',
        filter_single_small=False)
    assert len(ds) == 2
    with pytest.raises(RuntimeError, match='no image left'):
        ImageNetLocDataset(
            data_root=str(imagenet_root),
            data_prefix='val',
            missing_boxes='skip')
    with pytest.raises(FileNotFoundError, match='box folder'):
        ImageNetLocDataset(
            data_root=str(imagenet_root), data_prefix='val', box_prefix='nope')
    with pytest.raises(ValueError, match='max_area_ratio'):
        ImageNetLocDataset(
            data_root=str(imagenet_root), data_prefix='val', max_area_ratio=0)


def _voc_trainval(tmp_path, objects, difficult=()):
    """VOC2007 layout with images 000005 and 000007 and their XML boxes;
    returns the dataset arguments of the CorLoc protocol's trainval."""
    root = tmp_path / 'VOC2007'
    (root / 'Annotations').mkdir(parents=True)
    for name, boxes in zip(('000005', '000007'), objects):
        _write_img(root / 'JPEGImages' / f'{name}.jpg')
        _write_xml(
            root / 'Annotations' / f'{name}.xml',
            name,
            boxes,
            difficult=difficult)
    (root / 'ImageSets' / 'Main').mkdir(parents=True)
    (root / 'ImageSets' / 'Main' /
     'trainval.txt').write_text('000005\n000007\n')
    return dict(
        data_root=str(root),
        data_prefix='JPEGImages',
        box_prefix='Annotations',
        ann_file='ImageSets/Main/trainval.txt',
        with_label=False,
        img_suffix='.jpg',
        filter_single_small=False)


def test_voc_layout(tmp_path):
    kwargs = _voc_trainval(
        tmp_path, [[(1, 1, 40, 30), (50, 10, 70, 40)], [(5, 5, 9, 9)]],
        difficult=(1, ))
    ds = ImageNetLocDataset(skip_difficult=True, **kwargs)
    assert len(ds) == 2
    first = ds.get_data_info(0)
    assert first['img_path'].endswith('000005.jpg')
    np.testing.assert_array_equal(first['gt_bboxes'], [[0, 0, 40, 30]])


def test_coco_boxes(tmp_path):
    for name in ('x.jpg', 'y.jpg', 'z.jpg'):
        _write_img(tmp_path / 'images' / name)
    coco = dict(
        images=[
            dict(id=1, file_name='x.jpg', width=80, height=60),
            dict(id=2, file_name='y.jpg', width=80, height=60),
            dict(id=3, file_name='z.jpg', width=80, height=60),
        ],
        annotations=[
            dict(id=1, image_id=1, bbox=[10, 10, 20, 20], iscrowd=0),
            dict(id=2, image_id=2, bbox=[0, 0, 40, 40], iscrowd=0),
            dict(id=3, image_id=2, bbox=[5, 5, 10, 10], iscrowd=1),
            dict(id=4, image_id=3, bbox=[1, 1, 2, 2], iscrowd=1),
        ],
        categories=[dict(id=1, name='thing')])
    (tmp_path / 'ann.json').write_text(json.dumps(coco))
    where = dict(
        data_root=str(tmp_path),
        ann_file='ann.json',
        data_prefix=dict(img_path='images'))
    # z only has a crowd box: named, an error by default
    with pytest.raises(ValueError, match=r"1 of 3 images have no box.*z.jpg"):
        CocoBoxesDataset(**where)
    with logged_warnings() as warnings:
        ds = CocoBoxesDataset(without_boxes='skip', **where)
    assert len(ds) == 2
    assert len(warnings) == 1 and 'z.jpg' in warnings[0]
    assert "dropped (without_boxes='skip')" in warnings[0]
    np.testing.assert_array_equal(
        ds.get_data_info(0)['gt_bboxes'], [[10, 10, 30, 30]])
    np.testing.assert_array_equal(
        ds.get_data_info(1)['gt_bboxes'], [[0, 0, 40, 40]])
    assert ds.get_data_info(0)['ann_img_shape'] == (60, 80)
    with logged_warnings() as warnings:
        ds = CocoBoxesDataset(without_boxes='keep', **where)
    assert len(ds) == 3 and ds.get_data_info(2)['gt_bboxes'].shape == (0, 4)
    assert 'z.jpg' in warnings[0] and 'CorLoc miss' in warnings[0]
    ds = CocoBoxesDataset(filter_single_small=True, **where)
    assert len(ds) == 1  # 1600 px of y is 33% of the image
    (tmp_path / 'bad.json').write_text(json.dumps(dict(images=[])))
    with pytest.raises(ValueError, match='COCO JSON'):
        CocoBoxesDataset(data_root=str(tmp_path), ann_file='bad.json')


def test_coco_boxes_rounding_as_lost(tmp_path):
    """LOST's extract_gt_COCO: round(x), round(y), round(x + w),
    round(y + h) with Python's round (half to even)."""
    coco = dict(
        images=[dict(id=1, file_name='x.jpg', width=80, height=60)],
        annotations=[
            dict(id=1, image_id=1, bbox=[2.5, 3.5, 10.2, 4.0], iscrowd=0),
            dict(id=2, image_id=1, bbox=[0.4, 0.6, 0.2, 1.9], iscrowd=0),
        ],
        categories=[dict(id=1, name='thing')])
    (tmp_path / 'ann.json').write_text(json.dumps(coco))
    rounded = CocoBoxesDataset(
        ann_file=str(tmp_path / 'ann.json'), round_boxes=True)
    # 2.5 -> 2, 3.5 -> 4, 12.7 -> 13, 7.5 -> 8; 0.4 -> 0, 0.6 -> 1,
    # 0.6 -> 1, 2.5 -> 2
    np.testing.assert_array_equal(
        rounded.get_data_info(0)['gt_bboxes'], [[2, 4, 13, 8], [0, 1, 1, 2]])
    floats = CocoBoxesDataset(ann_file=str(tmp_path / 'ann.json'))
    np.testing.assert_allclose(
        floats.get_data_info(0)['gt_bboxes'],
        [[2.5, 3.5, 12.7, 7.5], [0.4, 0.6, 0.6, 2.5]],
        rtol=1e-6)


def test_expected_num_images(tmp_path, imagenet_root):
    coco = dict(
        images=[dict(id=1, file_name='x.jpg', width=80, height=60)],
        annotations=[dict(id=1, image_id=1, bbox=[1, 1, 4, 4], iscrowd=0)],
        categories=[dict(id=1, name='thing')])
    (tmp_path / 'ann.json').write_text(json.dumps(coco))
    ann = str(tmp_path / 'ann.json')
    assert len(CocoBoxesDataset(ann_file=ann, expected_num_images=1)) == 1
    with pytest.raises(ValueError, match='1 images, expected 19817'):
        CocoBoxesDataset(ann_file=ann, expected_num_images=19817)
    with pytest.raises(ValueError, match='2 images, expected 5011'):
        ImageNetLocDataset(
            data_root=str(imagenet_root),
            data_prefix='val',
            max_area_ratio=0.8,
            expected_num_images=5011)
    for bad in (0, 2.5, -3):
        with pytest.raises(ValueError, match='expected_num_images'):
            CocoBoxesDataset(ann_file=ann, expected_num_images=bad)
    with pytest.raises(ValueError, match='without_boxes'):
        CocoBoxesDataset(ann_file=ann, without_boxes='drop')


def test_voc_image_without_objects(tmp_path):
    kwargs = _voc_trainval(tmp_path, [[(1, 1, 9, 9)], []])
    with pytest.raises(ValueError, match=r'1 of 2 images.*000007.jpg'):
        ImageNetLocDataset(**kwargs)
    with logged_warnings() as warnings:
        ds = ImageNetLocDataset(without_boxes='keep', **kwargs)
    assert len(ds) == 2 and '000007.jpg' in warnings[0]
    assert ds.get_data_info(0)['ann_img_shape'] == (60, 80)
    # the PiB filter drops it: its protocol keeps exactly-one-box images
    assert len(
        ImageNetLocDataset(**dict(kwargs, filter_single_small=True))) == 1


def test_resize_edge_with_boxes_matches_resize_edge():
    from mmpretrain.datasets.transforms import ResizeEdge
    img = np.random.RandomState(0).randint(0, 255, (30, 50, 3), np.uint8)
    boxes = np.array([[5., 3., 25., 30.]], np.float32)
    out = ResizeEdgeWithBoxes(scale=24)(dict(img=img.copy(), gt_bboxes=boxes))
    ref = ResizeEdge(scale=24)(dict(img=img.copy()))
    np.testing.assert_array_equal(out['img'], ref['img'])
    assert out['img'].shape[:2] == (24, 40)  # int(24 * 50 / 30) = 40
    np.testing.assert_allclose(out['gt_bboxes'],
                               [[5 * 0.8, 3 * 0.8, 25 * 0.8, 30 * 0.8]])
    no_box = ResizeEdgeWithBoxes(scale=24)(dict(img=img.copy()))
    assert 'gt_bboxes' not in no_box
    with pytest.raises(ValueError, match='gt_bboxes'):
        ResizeEdgeWithBoxes(scale=24)(
            dict(img=img.copy(), gt_bboxes=np.zeros((2, 3))))


def test_build_from_mmpretrain_with_pib_pipeline(imagenet_root):
    """The config path: registry build, PiB pipeline, boxes packed."""
    from mmpretrain.registry import DATASETS

    import mmlocat  # noqa: F401
    ds = DATASETS.build(
        dict(
            type='mmlocat.ImageNetLocDataset',
            data_root=str(imagenet_root),
            data_prefix='val',
            pipeline=[
                dict(type='LoadImageFromFile'),
                dict(type='mmlocat.ResizeEdgeWithBoxes', scale=64),
                dict(type='CenterCrop', crop_size=48),
                dict(type='PackInputs', algorithm_keys=('gt_bboxes', )),
            ]))
    item = ds[0]
    assert tuple(item['inputs'].shape) == (3, 48, 48)
    # 80x60 -> 85x64 (x 85/80, y 64/60); crop 48: offsets x 18 (round
    # 18.5 -> 18), y 8; box [10, 10, 30, 30] -> [-7.375 -> 0, 2.667, 13.875,
    # 24]
    np.testing.assert_allclose(
        item['data_samples'].gt_bboxes,
        [[0., 10 * 64 / 60 - 8, 30 * 85 / 80 - 18, 30 * 64 / 60 - 8]],
        atol=1e-4)


def test_box_far_outside_its_image_is_refused(tmp_path):
    """xmax=5000 on an 80 px wide image was scored as given."""
    kwargs = _voc_trainval(tmp_path, [[(1, 1, 40, 30)], [(5, 5, 5000, 9)]])
    xml = osp.join(kwargs['data_root'], 'Annotations', '000007.xml')
    with pytest.raises(
            ValueError,
            match=re.escape(
                f"{xml} (image id '000007'): 1 box(es) outside the 60x80 "
                '(HxW) image, e.g. [[4.0, 4.0, 5000.0, 9.0]] (x1, y1, x2, '
                'y2 in pixels)')):
        ImageNetLocDataset(**kwargs)
    # within a pixel of the edge is no fault (converters round)
    kwargs = _voc_trainval(tmp_path / 'edge',
                           [[(1, 1, 80, 60)], [(5, 5, 9, 9)]])
    assert len(ImageNetLocDataset(**kwargs)) == 2
    for name in ('x.jpg', 'y.jpg'):
        _write_img(tmp_path / 'images' / name)
    coco = dict(
        images=[
            dict(id=1, file_name='x.jpg', width=80, height=60),
            dict(id=2, file_name='y.jpg', width=80, height=60)
        ],
        annotations=[
            dict(id=1, image_id=1, bbox=[10, 10, 20, 20], iscrowd=0),
            dict(id=2, image_id=2, bbox=[10, 10, 4990, 20], iscrowd=0)
        ])
    (tmp_path / 'ann.json').write_text(json.dumps(coco))
    where = dict(
        data_root=str(tmp_path),
        ann_file='ann.json',
        data_prefix=dict(img_path='images'))
    with pytest.raises(
            ValueError,
            match=r'ann.json \(image id 2, y.jpg\): 1 box\(es\) outside the '
            r'60x80 \(HxW\) image, e.g. \[\[10.0, 10.0, 5000.0, 30.0\]\]'):
        CocoBoxesDataset(**where)
    coco['images'].append(dict(id=2, file_name='y.jpg', width=80, height=60))
    coco['annotations'].pop()
    (tmp_path / 'ann.json').write_text(json.dumps(coco))
    with pytest.raises(
            ValueError,
            match=r"ann.json: image id 2 is listed twice in 'images'"):
        CocoBoxesDataset(**where)


def test_image_listed_twice_in_a_split_is_refused(tmp_path):
    """A repeated id was scored twice."""
    kwargs = _voc_trainval(tmp_path, [[(1, 1, 40, 30)], [(5, 5, 9, 9)]])
    split = osp.join(kwargs['data_root'], kwargs['ann_file'])
    with open(split, 'w') as f:
        f.write('000005\n000007\n\n000005\n')
    with pytest.raises(
            ValueError,
            match=re.escape(
                f"{split}:4: image '000005' is listed again (first at line "
                '1); it would be scored twice: remove the repeated line')):
        ImageNetLocDataset(**kwargs)
