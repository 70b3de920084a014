"""COCO-Object: COCO's 80 thing classes plus background, as a semantic
segmentation benchmark.

The zero-shot-segmentation literature (e.g. SCLIP,
https://arxiv.org/abs/2312.01597, and the LaSt-ViT paper's Tab. 4,
https://arxiv.org/abs/2602.22394) evaluates on COCO val2017 with semantic
maps drawn from the instance annotations. The maps here (mmlocat's
protocol, since no paper specifies it): ``0`` = background, ``k + 1`` =
the ``k``-th category in category-id order, instances drawn from the
largest to the smallest (a small object on a large one stays visible),
``iscrowd`` regions = ``255`` (ignored, over any class they cover).
"""
import json
import os
import os.path as osp
from typing import Dict, List, Sequence, Tuple

import numpy as np
from PIL import Image

from mmlocat.registry import DATASETS
from mmlocat.utils.hosts import is_installed

__all__ = [
    'COCO_OBJECT_CLASSES', 'COCO_OBJECT_SUFFIX', 'coco_object_map',
    'read_coco_instances', 'convert_coco_object'
]

COCO_THING_CLASSES = (
    'person', 'bicycle', 'car', 'motorcycle', 'airplane', 'bus', 'train',
    'truck', 'boat', 'traffic light', 'fire hydrant', 'stop sign',
    'parking meter', 'bench', 'bird', 'cat', 'dog', 'horse', 'sheep', 'cow',
    'elephant', 'bear', 'zebra', 'giraffe', 'backpack', 'umbrella', 'handbag',
    'tie', 'suitcase', 'frisbee', 'skis', 'snowboard', 'sports ball', 'kite',
    'baseball bat', 'baseball glove', 'skateboard', 'surfboard',
    'tennis racket', 'bottle', 'wine glass', 'cup', 'fork', 'knife', 'spoon',
    'bowl', 'banana', 'apple', 'sandwich', 'orange', 'broccoli', 'carrot',
    'hot dog', 'pizza', 'donut', 'cake', 'chair', 'couch', 'potted plant',
    'bed', 'dining table', 'toilet', 'tv', 'laptop', 'mouse', 'remote',
    'keyboard', 'cell phone', 'microwave', 'oven', 'toaster', 'sink',
    'refrigerator', 'book', 'clock', 'vase', 'scissors', 'teddy bear',
    'hair drier', 'toothbrush')
COCO_OBJECT_CLASSES = ('background', ) + COCO_THING_CLASSES
COCO_OBJECT_SUFFIX = '_instanceTrainIds.png'
IGNORE = 255


def _category_index(categories: Sequence[dict], path: str) -> Dict[int, int]:
    """Category id -> label (1 + position in id order), checked against the
    80 COCO names."""
    cats = sorted(categories, key=lambda c: c['id'])
    names = tuple(c['name'] for c in cats)
    if names != COCO_THING_CLASSES:
        missing = [n for n in COCO_THING_CLASSES if n not in names]
        extra = [n for n in names if n not in COCO_THING_CLASSES]
        raise ValueError(
            f'{path} does not list the 80 COCO categories in id order '
            f'({len(names)} found; missing {missing[:5]}, unexpected '
            f'{extra[:5]})')
    return {c['id']: i + 1 for i, c in enumerate(cats)}


def _decode(segm, hw: Tuple[int, int]) -> np.ndarray:
    from pycocotools import mask as mask_utils
    if isinstance(segm, list):  # polygons
        rle = mask_utils.merge(mask_utils.frPyObjects(segm, *hw))
    elif isinstance(segm.get('counts'), list):  # uncompressed RLE
        rle = mask_utils.frPyObjects(segm, *hw)
    else:
        rle = segm
    return mask_utils.decode(rle).astype(bool)


def coco_object_map(anns: Sequence[dict], labels: Dict[int, int],
                    hw: Tuple[int, int]) -> np.ndarray:
    """``(H, W)`` uint8 COCO-Object map of one image's annotations.

    Args:
        anns: The image's COCO annotations (with ``segmentation``).
        labels: Category id -> label (see the module docstring).
        hw: Image ``(height, width)``.
    """
    out = np.zeros(hw, dtype=np.uint8)
    crowd = np.zeros(hw, dtype=bool)
    for ann in sorted(anns, key=lambda a: -float(a.get('area', 0))):
        mask = _decode(ann['segmentation'], hw)
        if ann.get('iscrowd', 0):
            crowd |= mask
        else:
            out[mask] = labels[ann['category_id']]
    out[crowd] = IGNORE
    return out


def read_coco_instances(ann_file: str) -> dict:
    """Load a COCO instances JSON, checking its three lists are there."""
    if not osp.isfile(ann_file):
        raise FileNotFoundError(f'COCO annotation file not found: {ann_file}')
    with open(ann_file, encoding='utf-8') as f:
        coco = json.load(f)
    for key in ('images', 'annotations', 'categories'):
        if not isinstance(coco, dict) or key not in coco:
            raise ValueError(f'{ann_file} is not a COCO instances file: no '
                             f'{key!r}')
    return coco


def convert_coco_object(ann_file: str,
                        out_dir: str,
                        suffix: str = COCO_OBJECT_SUFFIX) -> List[str]:
    """Write one COCO-Object PNG per image of ``ann_file`` into
    ``out_dir`` (``<file stem><suffix>``); returns the written paths."""
    coco = read_coco_instances(ann_file)
    labels = _category_index(coco['categories'], ann_file)
    by_image: Dict[int, List[dict]] = {img['id']: [] for img in coco['images']}
    for ann in coco['annotations']:
        if ann['image_id'] not in by_image:
            raise ValueError(f'{ann_file}: annotation {ann.get("id")} '
                             f'refers to unknown image {ann["image_id"]}')
        by_image[ann['image_id']].append(ann)
    os.makedirs(out_dir, exist_ok=True)
    written = []
    for img in coco['images']:
        hw = (int(img['height']), int(img['width']))
        label = coco_object_map(by_image[img['id']], labels, hw)
        stem = osp.splitext(img['file_name'])[0]
        path = osp.join(out_dir, stem + suffix)
        Image.fromarray(label).save(path, format='PNG')
        written.append(path)
    return written


if is_installed('mmseg'):
    from mmseg.datasets import BaseSegDataset

    @DATASETS.register_module()
    class COCOObjectDataset(BaseSegDataset):
        """COCO-Object (background + 80 COCO things) in mmseg.

        Images ``<img_path>/<stem>.jpg``, maps
        ``<seg_map_path>/<stem>_instanceTrainIds.png`` written by
        ``tools/dataset_converters/coco_object.py`` (0 = background, 255 =
        ignore); no ``reduce_zero_label`` (background is a class).
        """
        METAINFO = dict(classes=COCO_OBJECT_CLASSES)

        def __init__(self,
                     img_suffix: str = '.jpg',
                     seg_map_suffix: str = COCO_OBJECT_SUFFIX,
                     reduce_zero_label: bool = False,
                     **kwargs) -> None:
            super().__init__(
                img_suffix=img_suffix,
                seg_map_suffix=seg_map_suffix,
                reduce_zero_label=reduce_zero_label,
                **kwargs)

    __all__.append('COCOObjectDataset')
