"""Tiny ImageNet-1k style folder dataset with ILSVRC LOC boxes.

Layout as mmpretrain's ``ImageNet`` / ``CustomDataset`` read it::

    root/train/<wnid>/<wnid>_<k>.JPEG
    root/val/<wnid>/ILSVRC2012_val_%08d.JPEG
    root/meta/{train,val}.txt           "<wnid>/<file> <label>" per line
    root/val_boxes/ILSVRC2012_val_%08d.xml

The XML files follow the ILSVRC (PASCAL VOC) layout with one ``object``
per instance; ``xmin``/``ymin``/``xmax``/``ymax`` are 1-based inclusive
pixel indices as in PASCAL VOC, i.e. the 0-based half-open box is
``(xmin - 1, ymin - 1, xmax, ymax)``.

Images cycle through three kinds so every filter has something to keep:
exactly one small object (box < 25 % of the image, what the PiB protocol
keeps), one large object, and two objects of the class.
"""
import os
import os.path as osp
from typing import Dict, List, Tuple
from xml.etree import ElementTree as ET

import numpy as np

from .common import add_voc_object, check_sizes, image_rng, save_jpg
from .shapes import Scene, draw_scene

__all__ = ['IMAGENET_OWNED', 'imagenet_wnids', 'write_imagenet']

IMAGENET_OWNED = ('train', 'val', 'meta', 'val_boxes')

# The first ten ImageNet-1k wnids (label order 0..9 of the real dataset).
_FIRST_WNIDS = ('n01440764', 'n01443537', 'n01484850', 'n01491361',
                'n01494475', 'n01496331', 'n01498041', 'n01514668',
                'n01514859', 'n01518878')

# (scale_range, num_objects) of the three image kinds.
_KINDS = (((0.15, 0.35), (1, 1)), ((0.55, 0.85), (1, 1)), ((0.3, 0.5), (2, 2)))


def imagenet_wnids(num_classes: int) -> List[str]:
    """Sorted wnids: the real first ten, then made-up ``n9xxxxxxx`` ids."""
    if num_classes < 1:
        raise ValueError(f'num_classes must be >= 1, got {num_classes}')
    extra = [f'n9{i:07d}' for i in range(max(0, num_classes - 10))]
    return sorted(list(_FIRST_WNIDS[:num_classes]) + extra)


def _scene(seed: int, split: str, index: int, hw, label: int) -> Scene:
    rng = image_rng(seed, split, index)
    scale, num = _KINDS[index % len(_KINDS)]
    for _ in range(50):
        scene = draw_scene(
            rng,
            hw,
            object_classes=[label],
            num_objects=num,
            scale_range=scale)
        if len(scene.labels) == num[0]:
            return scene
    raise RuntimeError(f'could not place {num[0]} objects in a {hw} image')


def _loc_xml(stem: str, hw: Tuple[int, int], wnid: str,
             boxes: np.ndarray) -> bytes:
    root = ET.Element('annotation')
    ET.SubElement(root, 'folder').text = 'val'
    ET.SubElement(root, 'filename').text = stem
    source = ET.SubElement(root, 'source')
    ET.SubElement(source, 'database').text = 'ILSVRC_2012'
    size = ET.SubElement(root, 'size')
    ET.SubElement(size, 'width').text = str(hw[1])
    ET.SubElement(size, 'height').text = str(hw[0])
    ET.SubElement(size, 'depth').text = '3'
    ET.SubElement(root, 'segmented').text = '0'
    for box in boxes.astype(int).tolist():
        add_voc_object(
            root, wnid, box, pose='Unspecified', truncated='0', difficult='0')
    return ET.tostring(root, encoding='utf-8')


def write_imagenet(root: str,
                   num_train: int,
                   num_val: int,
                   img_size: Tuple[int, int],
                   seed: int,
                   num_classes: int = 10) -> Dict:
    """Write the ImageNet-style folders, meta files and val LOC boxes.

    Args:
        root: Dataset root (``data_root`` of mmpretrain configs).
        num_train, num_val: Images PER CLASS in each split.
        img_size: ``(H, W)`` of every image.
        seed: Same seed, same bytes.
        num_classes: Number of classes (folders).
    """
    hw = check_sizes(num_train, num_val, img_size)
    wnids = imagenet_wnids(num_classes)
    os.makedirs(osp.join(root, 'meta'), exist_ok=True)
    os.makedirs(osp.join(root, 'val_boxes'), exist_ok=True)
    for split, per_class in (('train', num_train), ('val', num_val)):
        lines = []
        for label, wnid in enumerate(wnids):
            for k in range(per_class):
                index = label * per_class + k
                scene = _scene(seed, split, index, hw, label)
                if split == 'train':
                    stem = f'{wnid}_{k + 1}'
                else:
                    stem = f'ILSVRC2012_val_{index + 1:08d}'
                rel = f'{wnid}/{stem}.JPEG'
                save_jpg(osp.join(root, split, rel), scene.image)
                lines.append(f'{rel} {label}\n')
                if split == 'val':
                    with open(
                            osp.join(root, 'val_boxes', stem + '.xml'),
                            'wb') as f:
                        f.write(_loc_xml(stem, hw, wnid, scene.boxes))
        with open(osp.join(root, 'meta', f'{split}.txt'), 'w') as f:
            f.write(''.join(lines))
    return dict(
        data_root=root,
        train_prefix='train',
        val_prefix='val',
        train_ann_file='meta/train.txt',
        val_ann_file='meta/val.txt',
        val_boxes_dir='val_boxes',
        classes=wnids)
