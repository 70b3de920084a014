"""Tiny PASCAL VOC 2007 / 2012 and Cityscapes datasets in their real
layouts, as mmseg 1.x (``PascalVOCDataset``, ``CityscapesDataset``) and
mmlocat's box datasets read them.

* VOC: ``VOCdevkit/VOC20xx/JPEGImages/*.jpg``, ``SegmentationClass/*.png``
  (0 = background, class ``k`` of the 20 as ``k + 1``, a one-pixel 255
  "void" ring around every object as in the real masks),
  ``Annotations/*.xml`` (one ``<object>`` per instance, 1-based inclusive
  boxes), ``ImageSets/Segmentation/{train,val}.txt`` and
  ``ImageSets/Main/{train,val,trainval}.txt``.
* Cityscapes: ``leftImg8bit/{train,val}/<city>/<city>_%06d_000019_
  leftImg8bit.png`` and ``gtFine/.../*_gtFine_labelTrainIds.png`` (the 19
  train ids, 255 = ignore).
"""
import os
import os.path as osp
import xml.etree.ElementTree as ET
from typing import Dict, Tuple

import cv2
import numpy as np
from PIL import Image

from .common import (add_voc_object, check_sizes, evenly_spaced, image_rng,
                     save_jpg, save_png)
from .seg_writers import _label_map, _scenes, _split_classes
from .shapes import NO_CLASS, draw_scene

__all__ = [
    'VOC_CLASSES', 'write_pascal_voc', 'write_cityscapes', 'VOC_OWNED',
    'CITYSCAPES_OWNED', 'VOC07_OWNED'
]

# one year each: 2012 (the default), 2007 (``year=2007``), PASCAL Context's
# 2010 beside them in the same VOCdevkit
VOC_OWNED = ('VOCdevkit/VOC2012', )
VOC07_OWNED = ('VOCdevkit/VOC2007', )
CITYSCAPES_OWNED = ('leftImg8bit', 'gtFine')

# The 20 object classes in label order (mmseg's PascalVOCDataset without
# its first class, 'background').
VOC_CLASSES = ('aeroplane', 'bicycle', 'bird', 'boat', 'bottle', 'bus', 'car',
               'cat', 'chair', 'cow', 'diningtable', 'dog', 'horse',
               'motorbike', 'person', 'pottedplant', 'sheep', 'sofa', 'train',
               'tvmonitor')
VOID = 255


def _voc_xml(stem: str, hw: Tuple[int, int], labels, boxes) -> bytes:
    root = ET.Element('annotation')
    ET.SubElement(root, 'filename').text = stem + '.jpg'
    size = ET.SubElement(root, 'size')
    ET.SubElement(size, 'width').text = str(hw[1])
    ET.SubElement(size, 'height').text = str(hw[0])
    ET.SubElement(size, 'depth').text = '3'
    ET.SubElement(root, 'segmented').text = '1'
    for label, box in zip(labels, boxes.astype(int).tolist()):
        add_voc_object(root, VOC_CLASSES[int(label)], box, difficult='0')
    return ET.tostring(root, encoding='utf-8')


def _voc_label(scene) -> np.ndarray:
    label = np.where(scene.semantic == NO_CLASS, 0, scene.semantic + 1)
    kernel = np.ones((3, 3), np.uint8)
    for mask in scene.masks:
        mask = mask.astype(np.uint8)
        ring = (cv2.dilate(mask, kernel) > 0) & (cv2.erode(mask, kernel) == 0)
        label[ring] = VOID
    return label


def _write_lines(path: str, stems) -> None:
    os.makedirs(osp.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write(''.join(s + '\n' for s in stems))


def write_pascal_voc(root: str,
                     num_train: int,
                     num_val: int,
                     img_size: Tuple[int, int],
                     seed: int,
                     year: int = 2012,
                     num_active: int = 4) -> Dict:
    """Write ``root/VOCdevkit/VOC<year>`` (see the module docstring).

    ``num_active`` of the 20 classes are drawn, 1 to 3 objects an image.
    """
    hw = check_sizes(num_train, num_val, img_size)
    if year not in (2007, 2012):
        raise ValueError(f'year must be 2007 or 2012, got {year}')
    active = evenly_spaced(len(VOC_CLASSES), num_active)
    data_root = osp.join(root, 'VOCdevkit', f'VOC{year}')
    all_stems = []
    for split, num in (('train', num_train), ('val', num_val)):
        stems = []
        for i in range(num):
            scene = draw_scene(
                image_rng(seed, split, i), hw, object_classes=active)
            stem = f'{year}_{(0 if split == "train" else 500000) + i:06d}'
            stems.append(stem)
            save_jpg(
                osp.join(data_root, 'JPEGImages', stem + '.jpg'), scene.image)
            save_png(
                osp.join(data_root, 'SegmentationClass', stem + '.png'),
                _voc_label(scene))
            xml = _voc_xml(stem, hw, scene.labels, scene.boxes)
            path = osp.join(data_root, 'Annotations', stem + '.xml')
            os.makedirs(osp.dirname(path), exist_ok=True)
            with open(path, 'wb') as f:
                f.write(xml)
        for sub in ('Segmentation', 'Main'):
            _write_lines(
                osp.join(data_root, 'ImageSets', sub, f'{split}.txt'), stems)
        all_stems += stems
    _write_lines(
        osp.join(data_root, 'ImageSets', 'Main', 'trainval.txt'), all_stems)
    return dict(
        data_root=data_root,
        img_dir='JPEGImages',
        ann_dir='SegmentationClass',
        box_dir='Annotations',
        train_split='ImageSets/Segmentation/train.txt',
        val_split='ImageSets/Segmentation/val.txt',
        trainval_list='ImageSets/Main/trainval.txt',
        active_classes=list(active))


def write_cityscapes(root: str,
                     num_train: int,
                     num_val: int,
                     img_size: Tuple[int, int],
                     seed: int,
                     num_active: int = 6) -> Dict:
    """Write ``root/leftImg8bit`` and ``root/gtFine`` (19 train ids).

    The first two active ids (road, ...) form the background "stuff", the
    others are objects; a noise rectangle is labelled 255.
    """
    hw = check_sizes(num_train, num_val, img_size)
    things, stuff = _split_classes(19, num_active)
    for split, num, city in (('train', num_train, 'aachen'), ('val', num_val,
                                                              'frankfurt')):
        for i, scene in _scenes(seed, split, num, hw, things, stuff):
            stem = f'{city}_{i:06d}_000019'
            img = osp.join(root, 'leftImg8bit', split, city,
                           stem + '_leftImg8bit.png')
            os.makedirs(osp.dirname(img), exist_ok=True)
            Image.fromarray(scene.image).save(img, format='PNG')
            save_png(
                osp.join(root, 'gtFine', split, city,
                         stem + '_gtFine_labelTrainIds.png'),
                _label_map(scene.semantic, reduce_zero=False))
    return dict(
        data_root=root,
        train_img_dir='leftImg8bit/train',
        train_ann_dir='gtFine/train',
        val_img_dir='leftImg8bit/val',
        val_ann_dir='gtFine/val',
        num_classes=19,
        active_classes=sorted(things + stuff))
