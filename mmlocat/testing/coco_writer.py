"""Tiny COCO 2017 detection + instance-mask dataset and its OV-COCO split.

Layout as mmdet's ``CocoDataset`` reads it::

    root/train2017/%012d.jpg
    root/val2017/%012d.jpg
    root/annotations/instances_{train,val}2017.json
    root/annotations/instances_train2017_seen_2.json   (OV-COCO, base only)
    root/annotations/instances_val2017_all_2.json      (OV-COCO, 65 classes)

Categories are the 80 official ones (real ids and names); annotations have
``iscrowd=0``, tight ``bbox`` of the mask, ``area`` = mask pixels and a
``segmentation`` as compressed RLE (exact) or polygons. With polygons the
mask is what pycocotools rasterises from them (as mmdet and the COCO API
do), and ``bbox``/``area`` are taken from that mask, so the file is
self-consistent either way.
"""
import os.path as osp
from typing import Dict, List, Sequence, Tuple

import cv2
import numpy as np
from pycocotools import mask as mask_utils

from mmlocat.datasets.ov_coco import make_ov_coco_files
from .coco_categories import COCO_CATEGORIES, coco_categories
from .common import (FIXED_DATE, check_sizes, dump_instances_json, image_rng,
                     save_jpg)
from .shapes import Scene, draw_scene, tight_box

__all__ = [
    'DEFAULT_COCO_CLASSES', 'COCO_OWNED', 'encode_instance',
    'instance_annotations', 'write_coco'
]

COCO_OWNED = ('train2017', 'val2017', 'annotations')

# Drawn by default: base and novel OV-COCO classes and one class that is
# in neither ('traffic light'), so the split has something to drop.
DEFAULT_COCO_CLASSES = ('person', 'car', 'bird', 'bottle', 'chair', 'zebra',
                        'airplane', 'cat', 'dog', 'cup', 'umbrella',
                        'traffic light')

# Image ids of the val split start here so ids are unique across splits.
VAL_ID_OFFSET = 1000000


def encode_instance(mask: np.ndarray,
                    segm_format: str) -> Tuple[object, np.ndarray]:
    """Encode one bool mask as a COCO ``segmentation``.

    Returns:
        tuple: ``(segmentation, mask)`` where ``mask`` is what decoding the
        segmentation gives back (equal to the input for RLE).
    """
    h, w = mask.shape
    if segm_format == 'polygon':
        contours, _ = cv2.findContours(
            mask.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
        polys = [
            c.reshape(-1).astype(float).tolist() for c in contours
            if len(c) >= 3
        ]
        if polys:
            rle = mask_utils.merge(mask_utils.frPyObjects(polys, h, w))
            decoded = mask_utils.decode(rle).astype(bool)
            if decoded.sum() > 0:
                return polys, decoded
        # Too thin for a polygon: fall back to the exact RLE.
    elif segm_format != 'rle':
        raise ValueError(
            f"segm_format must be 'rle' or 'polygon', got {segm_format!r}")
    rle = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
    return dict(size=[h, w], counts=rle['counts'].decode('ascii')), mask


def instance_annotations(scene: Scene,
                         image_id: int,
                         first_ann_id: int,
                         cat_ids: Sequence[int],
                         segm_format: str,
                         iscrowd: bool = True) -> List[Dict]:
    """COCO-style annotation dicts of a scene's instances.

    ``cat_ids[label]`` is the category id of scene label ``label``; pass
    ``iscrowd=False`` to omit the key (LVIS).
    """
    anns = []
    for k, (mask, label) in enumerate(zip(scene.masks, scene.labels)):
        segm, decoded = encode_instance(mask, segm_format)
        x1, y1, x2, y2 = tight_box(decoded).tolist()
        ann = dict(
            id=first_ann_id + k,
            image_id=image_id,
            category_id=int(cat_ids[int(label)]),
            segmentation=segm,
            area=float(decoded.sum()),
            bbox=[x1, y1, x2 - x1, y2 - y1])
        if iscrowd:
            ann['iscrowd'] = 0
        anns.append(ann)
    return anns


def _class_indices(names: Sequence[str]) -> List[int]:
    index = {name: i for i, (_, name, _) in enumerate(COCO_CATEGORIES)}
    unknown = [n for n in names if n not in index]
    if unknown:
        raise ValueError(f'not COCO category names: {unknown}')
    return [index[n] for n in names]


def write_coco(root: str,
               num_train: int,
               num_val: int,
               img_size: Tuple[int, int],
               seed: int,
               classes: Sequence[str] = DEFAULT_COCO_CLASSES,
               segm_format: str = 'rle') -> Dict:
    """Write a tiny COCO 2017 instances dataset and its OV-COCO split.

    Args:
        root: Dataset root (the ``data_root`` of mmdet configs).
        num_train, num_val: Images per split.
        img_size: ``(H, W)`` of every image.
        seed: Same seed, same bytes.
        classes: COCO names to draw objects from; the json files always
            list all 80 categories.
        segm_format: ``'rle'`` or ``'polygon'``.
    """
    hw = check_sizes(num_train, num_val, img_size)
    if segm_format not in ('rle', 'polygon'):
        raise ValueError(
            f"segm_format must be 'rle' or 'polygon', got {segm_format!r}")
    drawn = _class_indices(classes)
    cat_ids = [cid for cid, _, _ in COCO_CATEGORIES]
    ann_dir = osp.join(root, 'annotations')
    paths = dict(data_root=root)
    for split, num, offset in (('train', num_train, 1), ('val', num_val,
                                                         VAL_ID_OFFSET)):
        images, anns = [], []
        sub = f'{split}2017'
        for i in range(num):
            scene = draw_scene(
                image_rng(seed, split, i),
                hw,
                object_classes=drawn,
                num_objects=(1, 4))
            image_id = offset + i
            file_name = f'{image_id:012d}.jpg'
            save_jpg(osp.join(root, sub, file_name), scene.image)
            images.append(
                dict(
                    license=1,
                    file_name=file_name,
                    coco_url=f'http://images.cocodataset.org/{sub}/'
                    f'{file_name}',
                    height=hw[0],
                    width=hw[1],
                    date_captured=FIXED_DATE,
                    id=image_id))
            anns += instance_annotations(scene, image_id,
                                         offset * 100 + len(anns), cat_ids,
                                         segm_format)
        ann_file = osp.join(ann_dir, f'instances_{sub}.json')
        dump_instances_json(ann_file, 'mmlocat tiny synthetic COCO', images,
                            anns, coco_categories())
        paths[f'{split}_ann_file'] = f'annotations/instances_{sub}.json'
        paths[f'{split}_img_dir'] = f'{sub}/'
    ov = make_ov_coco_files(ann_dir, ann_dir)
    paths['ov_train_ann_file'] = osp.relpath(ov['train'], root)
    paths['ov_val_ann_file'] = osp.relpath(ov['val'], root)
    return paths
