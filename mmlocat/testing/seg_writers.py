"""Tiny semantic-segmentation datasets in the ADE20K, COCO-Stuff-164k and
PASCAL Context-59 on-disk layouts, as mmseg 1.x reads them.

Label conventions (those of mmseg's converted data):

* ADE20K (150 classes) and PASCAL Context-59 store class ``k`` as ``k + 1``
  and 0 for "other"; mmseg's datasets use ``reduce_zero_label=True``, which
  maps 0 to 255 (ignore) and ``k + 1`` back to ``k``.
* COCO-Stuff-164k ``*_labelTrainIds.png`` store the 171 train ids 0..170
  directly and 255 for ignore.

Each scene draws a few "stuff" classes as the background and a few "thing"
classes as objects; a random rectangle of noise is left unlabelled so that
the ignore value is exercised.
"""
import os
import os.path as osp
from typing import Dict, Sequence, Tuple

import numpy as np

from mmlocat.datasets.coco_object import COCO_THING_IDS
from .common import check_sizes, evenly_spaced, image_rng, save_jpg, save_png
from .shapes import NO_CLASS, draw_scene

__all__ = [
    'write_ade20k', 'write_coco_stuff', 'write_pascal_context', 'ADE20K_OWNED',
    'COCO_STUFF_OWNED', 'PASCAL_CONTEXT_OWNED', 'ade20k_file'
]

# Top-level entries under ``root`` that each writer creates (and that a
# regeneration with other parameters may delete).
ADE20K_OWNED = ('ADEChallengeData2016', )
COCO_STUFF_OWNED = ('images', 'annotations')
# one year of the shared VOCdevkit (VOC 2007 / 2012 sit beside it)
PASCAL_CONTEXT_OWNED = ('VOCdevkit/VOC2010', )

# mmseg's COCO-Stuff train id (0..170, 255) -> the original map's value
# (category id - 1): the 80 thing ids, then stuff ids 92..182 as 91..181.
_COCO_STUFF_RAW = np.full(256, 255, dtype=np.uint8)
_COCO_STUFF_RAW[:80] = np.array(COCO_THING_IDS) - 1
_COCO_STUFF_RAW[80:171] = np.arange(91, 182)


def _label_map(semantic: np.ndarray, reduce_zero: bool) -> np.ndarray:
    """Semantic ids (-1 = none) to the stored PNG values."""
    if reduce_zero:
        return np.where(semantic == NO_CLASS, 0, semantic + 1)
    return np.where(semantic == NO_CLASS, 255, semantic)


def _scenes(seed: int, split: str, num: int, img_size: Tuple[int, int],
            things: Sequence[int], stuff: Sequence[int]):
    for i in range(num):
        yield i, draw_scene(
            image_rng(seed, split, i),
            img_size,
            object_classes=things,
            num_objects=(1, 3),
            stuff_classes=stuff,
            ignore_prob=0.5)


def _split_classes(num_classes: int, num_active: int):
    active = evenly_spaced(num_classes, num_active)
    # The first two active ids are the background "stuff".
    return active[2:], active[:2]


def write_ade20k(root: str,
                 num_train: int,
                 num_val: int,
                 img_size: Tuple[int, int],
                 seed: int,
                 num_active: int = 8) -> Dict:
    """Write ``root/ADEChallengeData2016`` (150 classes).

    Layout: ``images/{training,validation}/ADE_{train,val}_%08d.jpg`` and
    ``annotations/{training,validation}/*.png`` with class ``k`` stored as
    ``k + 1``; ``num_active`` of the 150 classes are drawn.
    """
    hw = check_sizes(num_train, num_val, img_size)
    things, stuff = _split_classes(150, num_active)
    data_root = osp.join(root, 'ADEChallengeData2016')
    for split, sub, tag, num in (('train', 'training', 'train', num_train),
                                 ('val', 'validation', 'val', num_val)):
        for i, scene in _scenes(seed, split, num, hw, things, stuff):
            name = f'ADE_{tag}_{i + 1:08d}'
            save_jpg(
                osp.join(data_root, 'images', sub, name + '.jpg'), scene.image)
            save_png(
                osp.join(data_root, 'annotations', sub, name + '.png'),
                _label_map(scene.semantic, reduce_zero=True))
    return dict(
        data_root=data_root,
        train_img_dir='images/training',
        train_ann_dir='annotations/training',
        val_img_dir='images/validation',
        val_ann_dir='annotations/validation',
        num_classes=150,
        active_classes=sorted(things + stuff))


def ade20k_file(data_root: str,
                kind: str,
                index: int,
                split: str = 'train') -> str:
    """Path of image (``kind='img'``) or label PNG (``'ann'``) number
    ``index`` (1-based, as ADE20K numbers them) of ``split`` ('train' or
    'val') in a :func:`write_ade20k` set."""
    sub, ext = ('images', 'jpg') if kind == 'img' else ('annotations', 'png')
    folder = 'training' if split == 'train' else 'validation'
    return osp.join(data_root, sub, folder, f'ADE_{split}_{index:08d}.{ext}')


def write_coco_stuff(root: str,
                     num_train: int,
                     num_val: int,
                     img_size: Tuple[int, int],
                     seed: int,
                     num_things: int = 6,
                     num_stuff: int = 2) -> Dict:
    """Write COCO-Stuff-164k under ``root`` (171 classes, 255 = ignore).

    Layout: ``images/{train2017,val2017}/%012d.jpg``,
    ``annotations/{train2017,val2017}/%012d_labelTrainIds.png`` (mmseg's
    converted maps) and next to them the original ``%012d.png``
    (``stuffthingmaps_trainval2017``: COCO category id - 1, 255
    unlabelled), as mmseg's converter leaves them. Objects use the 80
    "thing" ids (0..79), backgrounds the 91 "stuff" ids (80..170).
    """
    hw = check_sizes(num_train, num_val, img_size)
    things = evenly_spaced(80, num_things)
    stuff = tuple(80 + s for s in evenly_spaced(91, num_stuff))
    for split, num, offset in (('train', num_train, 1), ('val', num_val,
                                                         1000000)):
        sub = f'{split}2017'
        for i, scene in _scenes(seed, split, num, hw, things, stuff):
            name = f'{offset + i:012d}'
            save_jpg(osp.join(root, 'images', sub, name + '.jpg'), scene.image)
            train_ids = _label_map(scene.semantic, reduce_zero=False)
            save_png(
                osp.join(root, 'annotations', sub,
                         name + '_labelTrainIds.png'), train_ids)
            save_png(
                osp.join(root, 'annotations', sub, name + '.png'),
                _COCO_STUFF_RAW[train_ids])
    return dict(
        data_root=root,
        train_img_dir='images/train2017',
        train_ann_dir='annotations/train2017',
        val_img_dir='images/val2017',
        val_ann_dir='annotations/val2017',
        num_classes=171,
        active_classes=sorted(things + stuff))


def write_pascal_context(root: str,
                         num_train: int,
                         num_val: int,
                         img_size: Tuple[int, int],
                         seed: int,
                         num_active: int = 8) -> Dict:
    """Write ``root/VOCdevkit/VOC2010`` as PASCAL Context-59.

    Layout: ``JPEGImages/*.jpg``, ``SegmentationClassContext/*.png`` (class
    ``k`` of the 59 stored as ``k + 1``, 0 = background, ignored through
    ``reduce_zero_label``) and ``ImageSets/SegmentationContext/{train,val}
    .txt`` listing the image stems.
    """
    hw = check_sizes(num_train, num_val, img_size)
    things, stuff = _split_classes(59, num_active)
    data_root = osp.join(root, 'VOCdevkit', 'VOC2010')
    for split, num, year in (('train', num_train, 2008), ('val', num_val,
                                                          2009)):
        stems = []
        for i, scene in _scenes(seed, split, num, hw, things, stuff):
            stem = f'{year}_{i + 1:06d}'
            stems.append(stem)
            save_jpg(
                osp.join(data_root, 'JPEGImages', stem + '.jpg'), scene.image)
            save_png(
                osp.join(data_root, 'SegmentationClassContext', stem + '.png'),
                _label_map(scene.semantic, reduce_zero=True))
        list_path = osp.join(data_root, 'ImageSets', 'SegmentationContext',
                             f'{split}.txt')
        os.makedirs(osp.dirname(list_path), exist_ok=True)
        with open(list_path, 'w') as f:
            f.write(''.join(s + '\n' for s in stems))
    return dict(
        data_root=data_root,
        img_dir='JPEGImages',
        ann_dir='SegmentationClassContext',
        train_split='ImageSets/SegmentationContext/train.txt',
        val_split='ImageSets/SegmentationContext/val.txt',
        num_classes=59,
        active_classes=sorted(things + stuff))
