"""COCO-Object: COCO's 80 thing classes plus background, as a semantic
segmentation benchmark.

The zero-shot-segmentation literature (GroupViT, TCL, SCLIP
https://arxiv.org/abs/2312.01597, and so the LaSt-ViT paper's Tab. 4,
https://arxiv.org/abs/2602.22394) evaluates on COCO val2017 with maps
converted from COCO-Stuff-164k's (GroupViT's
``convert_dataset/convert_coco_object.py``, copied by SCLIP as
``datasets/cvt_coco_object.py``): a COCO-Stuff map stores category id - 1;
a thing id becomes its position among the 80 thing categories in id order
plus 1, every stuff id and the unlabelled 255 become 0 (background), and
nothing is ignored. :func:`convert_coco_stuff_object` writes those maps
(the default). Unlike GroupViT's script, a value that is no COCO-Stuff id
(one of the 11 unused thing ids, or 182..254, which it would leave
unchanged) is an error.

mmlocat's earlier maps, an option (:func:`convert_coco_object`), are drawn
from the instance annotations: ``0`` = background, ``k + 1`` = the
``k``-th category in category-id order, instances drawn from the largest
to the smallest (a small object on a large one stays visible), ``iscrowd``
regions = ``255`` (ignored, over any class they cover).
"""
import json
import os
import os.path as osp
from typing import Dict, List, Sequence, Tuple

import numpy as np
from mmengine.utils import track_iter_progress
from PIL import Image

from mmlocat.registry import DATASETS
from mmlocat.utils.hosts import is_installed

__all__ = [
    'COCO_OBJECT_CLASSES', 'COCO_OBJECT_SUFFIX', 'COCO_THING_IDS',
    'coco_object_map', 'read_coco_instances', 'convert_coco_object',
    'coco_stuff_object_lut', 'coco_object_from_stuff',
    'convert_coco_stuff_object'
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
# Their COCO category ids (1..90 with the 10 gaps of the release).
COCO_THING_IDS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16, 17, 18,
                  19, 20, 21, 22, 23, 24, 25, 27, 28, 31, 32, 33, 34, 35, 36,
                  37, 38, 39, 40, 41, 42, 43, 44, 46, 47, 48, 49, 50, 51, 52,
                  53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 67, 70,
                  72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 84, 85, 86, 87,
                  88, 89, 90)
COCO_OBJECT_CLASSES = ('background', ) + COCO_THING_CLASSES
COCO_OBJECT_SUFFIX = '_instanceTrainIds.png'
IGNORE = 255
# COCO-Stuff-164k map values: category id - 1; stuff ids 92..182, 255
# unlabelled.
STUFF_VALUES = range(91, 182)
UNLABELLED = 255


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
    ``out_dir`` (``<file stem><suffix>``) from the instance annotations
    (mmlocat's earlier maps, see the module docstring); returns the
    written paths."""
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
    for img in track_iter_progress(coco['images']):
        hw = (int(img['height']), int(img['width']))
        label = coco_object_map(by_image[img['id']], labels, hw)
        stem = osp.splitext(img['file_name'])[0]
        path = osp.join(out_dir, stem + suffix)
        Image.fromarray(label).save(path, format='PNG')
        written.append(path)
    return written


def coco_stuff_object_lut() -> np.ndarray:
    """``(256,)`` int16: COCO-Stuff-164k map value -> COCO-Object label
    (GroupViT's rule, see the module docstring); -1 for values that are no
    COCO-Stuff id."""
    lut = np.full(256, -1, dtype=np.int16)
    for label, cat_id in enumerate(COCO_THING_IDS, 1):
        lut[cat_id - 1] = label
    lut[list(STUFF_VALUES)] = 0
    lut[UNLABELLED] = 0
    return lut


def coco_object_from_stuff(stuff_map: np.ndarray,
                           path: str = 'map') -> np.ndarray:
    """``(H, W)`` uint8 COCO-Object labels of a COCO-Stuff-164k map.

    Raises:
        ValueError: A value that is no COCO-Stuff id, naming ``path``.
    """
    stuff_map = np.asarray(stuff_map)
    if stuff_map.ndim != 2 or stuff_map.dtype != np.uint8:
        raise ValueError(f'{path}: a COCO-Stuff map is a single-channel '
                         f'8-bit PNG, got {stuff_map.dtype} of shape '
                         f'{stuff_map.shape}')
    labels = coco_stuff_object_lut()[stuff_map]
    if (labels < 0).any():
        bad = np.unique(stuff_map[labels < 0]).tolist()
        raise ValueError(
            f'{path} holds values {bad[:10]} that are no COCO-Stuff-164k ids '
            '(category id - 1 for the 80 things and 91 stuff classes, 255 '
            'unlabelled); is it a *_labelTrainIds.png (mmseg\'s 0..170 train '
            'ids) rather than the original map?')
    return labels.astype(np.uint8)


def convert_coco_stuff_object(stuff_dir: str,
                              out_dir: str,
                              suffix: str = COCO_OBJECT_SUFFIX) -> List[str]:
    """Write one COCO-Object PNG per COCO-Stuff-164k map of ``stuff_dir``.

    The maps are the original ``<stem>.png`` files of COCO-Stuff-164k
    (``stuffthingmaps_trainval2017``; mmseg's converter keeps them next to
    its ``*_labelTrainIds.png``, which are skipped here, as GroupViT does).

    Returns:
        The written ``out_dir/<stem><suffix>`` paths.

    Raises:
        FileNotFoundError: ``stuff_dir`` is not a folder.
        ValueError: It holds no map, or a map with a foreign value.
    """
    if not osp.isdir(stuff_dir):
        raise FileNotFoundError(
            f'COCO-Stuff-164k map folder not found: {stuff_dir}')
    names = sorted(
        n for n in os.listdir(stuff_dir)
        if n.endswith('.png') and 'TrainIds' not in n)
    if not names:
        raise ValueError(
            f'{stuff_dir} holds no COCO-Stuff-164k maps (<stem>.png, '
            'not *TrainIds.png): point it at the original maps of '
            'stuffthingmaps_trainval2017 (e.g. data/coco_stuff164k/'
            'annotations/val2017)')
    os.makedirs(out_dir, exist_ok=True)
    written = []
    for name in track_iter_progress(names):
        src = osp.join(stuff_dir, name)
        label = coco_object_from_stuff(np.array(Image.open(src)), src)
        path = osp.join(out_dir, osp.splitext(name)[0] + suffix)
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
        ``tools/dataset_converters/coco_object.py`` (0 = background; 255 =
        ignore, which only the instance-based maps have); no
        ``reduce_zero_label`` (background is a class), as SCLIP's
        ``COCOObjectDataset``.
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
