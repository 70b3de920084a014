"""COCO-Object maps from COCO instance annotations (tiny generated COCO)."""
import json
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
