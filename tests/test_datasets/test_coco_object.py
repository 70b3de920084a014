"""COCO-Object maps: from COCO-Stuff-164k maps (GroupViT / SCLIP, the
default) and from COCO instance annotations (tiny generated data)."""
import json
import os
import os.path as osp

import numpy as np
import pytest
from PIL import Image
from pycocotools.coco import COCO

from mmlocat.datasets.coco_object import (COCO_OBJECT_CLASSES,
                                          convert_coco_object)
from mmlocat.testing import generate


def test_classes_are_mmdets_coco_plus_background():
    from mmdet.datasets import CocoDataset
    assert COCO_OBJECT_CLASSES == ('background', ) + tuple(
        CocoDataset.METAINFO['classes'])


def test_maps_match_pycocotools_masks(tmp_path):
    paths = generate('coco_object', str(tmp_path), 1, 3, (48, 48))
    ann_file = osp.join(paths['data_root'], paths['val_ann_file'])
    coco = COCO(ann_file)
    cat_ids = sorted(coco.getCatIds())
    checked = 0
    for img in coco.dataset['images']:
        label = np.array(
            Image.open(
                osp.join(paths['data_root'], paths['val_seg_dir'],
                         img['file_name'][:-4] + '_instanceTrainIds.png')))
        ref = np.zeros_like(label)
        anns = coco.loadAnns(coco.getAnnIds(imgIds=img['id']))
        for ann in sorted(anns, key=lambda a: -a['area']):
            ref[coco.annToMask(ann) > 0] = cat_ids.index(
                ann['category_id']) + 1
        np.testing.assert_array_equal(label, ref)
        checked += int((ref > 0).any())
    assert checked == 3


def test_crowd_is_ignored_and_small_on_top(tmp_path):
    cats = [
        dict(id=i + 1, name=n) for i, n in enumerate(COCO_OBJECT_CLASSES[1:])
    ]
    big = [[0, 0, 10, 0, 10, 10, 0, 10]]
    small = [[2, 2, 5, 2, 5, 5, 2, 5]]
    crowd = [[6, 6, 9, 6, 9, 9, 6, 9]]
    ann = dict(
        images=[dict(id=1, file_name='x.jpg', height=12, width=12)],
        annotations=[
            dict(
                id=1,
                image_id=1,
                category_id=2,
                segmentation=small,
                area=9.,
                iscrowd=0),
            dict(
                id=2,
                image_id=1,
                category_id=1,
                segmentation=big,
                area=100.,
                iscrowd=0),
            dict(
                id=3,
                image_id=1,
                category_id=3,
                segmentation=crowd,
                area=9.,
                iscrowd=1),
        ],
        categories=cats)
    path = tmp_path / 'ann.json'
    path.write_text(json.dumps(ann))
    out, = convert_coco_object(str(path), str(tmp_path / 'maps'))
    label = np.array(Image.open(out))
    assert label[3, 3] == 2  # bicycle over person
    assert label[1, 1] == 1
    assert label[7, 7] == 255
    assert label[11, 11] == 0


def test_bad_annotation_files(tmp_path):
    with pytest.raises(FileNotFoundError, match='nothing.json'):
        convert_coco_object(str(tmp_path / 'nothing.json'), str(tmp_path))
    path = tmp_path / 'few.json'
    path.write_text(
        json.dumps(
            dict(
                images=[],
                annotations=[],
                categories=[dict(id=1, name='person')])))
    with pytest.raises(ValueError, match='80 COCO categories.*1 found'):
        convert_coco_object(str(path), str(tmp_path))
    path.write_text(json.dumps(dict(images=[])))
    with pytest.raises(ValueError, match="no 'annotations'"):
        convert_coco_object(str(path), str(tmp_path))


def test_thing_ids_are_cocos():
    from mmlocat.datasets.coco_object import COCO_THING_IDS
    from mmlocat.testing.coco_categories import COCO_CATEGORIES
    assert COCO_THING_IDS == tuple(c[0] for c in COCO_CATEGORIES)
    assert COCO_OBJECT_CLASSES[1:] == tuple(c[1] for c in COCO_CATEGORIES)


def test_maps_from_coco_stuff_follow_groupvits_rule(tmp_path):
    """The generated COCO-Stuff-164k has both mmseg's train ids and the
    original maps: a thing (train id t < 80) becomes t + 1, stuff and
    unlabelled 0; the class is the category of the original value + 1."""
    from mmlocat.testing.coco_categories import COCO_CATEGORIES
    names = {c[0]: c[1] for c in COCO_CATEGORIES}
    paths = generate('coco_object_stuff', str(tmp_path), 1, 3, (48, 48))
    root = paths['data_root']
    ann_dir = osp.join(root, paths['val_ann_dir'])
    seen = set()
    for stem in sorted(
            p[:-4] for p in os.listdir(osp.join(root, paths['val_img_dir']))):
        raw = np.array(Image.open(osp.join(ann_dir, stem + '.png')))
        train_ids = np.array(
            Image.open(osp.join(ann_dir, stem + '_labelTrainIds.png')))
        label = np.array(
            Image.open(
                osp.join(root, paths['val_seg_dir'],
                         stem + '_instanceTrainIds.png')))
        np.testing.assert_array_equal(
            label, np.where(train_ids < 80, train_ids + 1, 0))
        for value in np.unique(raw):
            got = set(np.unique(label[raw == value]).tolist())
            if value + 1 in names:  # a thing: its category's name
                assert [COCO_OBJECT_CLASSES[g]
                        for g in got] == [names[value + 1]]
            else:  # stuff (92..182) or unlabelled (255)
                assert (91 <= value <= 181 or value == 255) and got == {0}
        seen |= set(np.unique(label).tolist())
    assert 0 in seen and len(seen) > 2
    # mmlocat's COCOObjectDataset reads them (nothing ignored)
    from mmseg.datasets.transforms import LoadAnnotations

    from mmlocat.datasets import COCOObjectDataset
    dataset = COCOObjectDataset(
        data_root=root,
        data_prefix=dict(
            img_path=paths['val_img_dir'], seg_map_path=paths['val_seg_dir']),
        pipeline=[LoadAnnotations()])
    assert len(dataset) == 3
    assert 255 not in np.unique(dataset[0]['gt_seg_map'])


def test_coco_stuff_conversion_refuses_foreign_maps(tmp_path):
    from mmlocat.datasets.coco_object import convert_coco_stuff_object
    with pytest.raises(FileNotFoundError, match='nowhere'):
        convert_coco_stuff_object(str(tmp_path / 'nowhere'), str(tmp_path))
    src = tmp_path / 'maps'
    src.mkdir()
    with pytest.raises(ValueError, match='holds no COCO-Stuff-164k maps'):
        convert_coco_stuff_object(str(src), str(tmp_path / 'out'))
    # mmseg's train ids are skipped; an unused thing id (12 - 1) is refused
    Image.fromarray(np.zeros((4, 4),
                             np.uint8)).save(src / 'x_labelTrainIds.png')
    bad = np.full((4, 4), 91, np.uint8)
    bad[0, 0] = 11
    Image.fromarray(bad).save(src / 'y.png')
    with pytest.raises(ValueError, match=r'y.png holds values \[11\]'):
        convert_coco_stuff_object(str(src), str(tmp_path / 'out'))
    Image.fromarray(np.full((4, 4), 181, np.uint8)).save(src / 'y.png')
    written = convert_coco_stuff_object(str(src), str(tmp_path / 'out'))
    assert [osp.basename(w) for w in written] == ['y_instanceTrainIds.png']
    assert (np.array(Image.open(written[0])) == 0).all()
