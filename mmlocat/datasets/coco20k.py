"""COCO20k: the object-discovery subset of COCO train2014 used by LOST
(Siméoni et al., "Localizing Objects with Self-Supervised Transformers and
no Labels", https://arxiv.org/abs/2109.14279) and the LaSt-ViT paper's
Tab. 7. LOST ships the list of its 19,817 images (``coco_20k_filenames.txt``);
:func:`make_coco20k` keeps those images of the official
``instances_train2014.json`` and their annotations (crowd boxes stay in the
file; :class:`~mmlocat.datasets.CocoBoxesDataset` ignores them, as LOST's
CorLoc does not count crowd boxes — mmlocat's reading of its code).
"""
import json
import os
import os.path as osp
from typing import Dict, List

from .coco_object import read_coco_instances

__all__ = ['read_image_list', 'make_coco20k']


def read_image_list(path: str) -> List[str]:
    """File names of an image list (one a line, any folder prefix
    dropped, blank lines skipped)."""
    if not osp.isfile(path):
        raise FileNotFoundError(f'image list not found: {path}')
    with open(path, encoding='utf-8') as f:
        names = [osp.basename(line.strip()) for line in f if line.strip()]
    if not names:
        raise ValueError(f'{path} lists no images')
    return names


def make_coco20k(ann_file: str, image_list: str, out_file: str) -> Dict:
    """Write the COCO JSON of the listed images; returns a summary.

    Raises:
        ValueError: A listed image is not in ``ann_file`` (another split or
            list), duplicates in the list, or a file that is not COCO.
    """
    coco = read_coco_instances(ann_file)
    names = read_image_list(image_list)
    if len(set(names)) != len(names):
        raise ValueError(f'{image_list} lists some images twice')
    by_name = {img['file_name']: img for img in coco['images']}
    missing = [n for n in names if n not in by_name]
    if missing:
        raise ValueError(
            f'{len(missing)} images of {image_list} are not in {ann_file} '
            f'(e.g. {missing[:3]}); COCO20k is a subset of train2014')
    images = [by_name[n] for n in names]
    ids = {img['id'] for img in images}
    anns = [a for a in coco['annotations'] if a['image_id'] in ids]
    out = dict(
        info=coco.get('info', {}),
        licenses=coco.get('licenses', []),
        images=images,
        annotations=anns,
        categories=coco['categories'])
    os.makedirs(osp.dirname(osp.abspath(out_file)), exist_ok=True)
    with open(out_file, 'w', encoding='utf-8') as f:
        json.dump(out, f)
    return dict(
        images=len(images),
        annotations=len(anns),
        crowd=sum(int(a.get('iscrowd', 0)) for a in anns))
