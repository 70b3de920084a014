"""COCO20k: the object-discovery subset of COCO train2014 used by LOST
(Siméoni et al., "Localizing Objects with Self-Supervised Transformers and
no Labels", https://arxiv.org/abs/2109.14279) and the LaSt-ViT paper's
Tab. 7. LOST ships the list of its 19,817 images (``coco_20k_filenames.txt``
in github valeoai/LOST); :func:`make_coco20k` keeps those images of the
official ``instances_train2014.json`` and their annotations (crowd boxes
stay in the file; :class:`~mmlocat.datasets.CocoBoxesDataset` ignores them,
as LOST's ``extract_gt_COCO`` does). :func:`check_coco20k_list` tells
whether a list is LOST's, by count and by a digest of its sorted names.
"""
import hashlib
import json
import os
import os.path as osp
from collections import Counter
from typing import Dict, List, Optional

from .coco_object import read_coco_instances

__all__ = [
    'read_image_list', 'make_coco20k', 'check_coco20k_list',
    'LOST_COCO20K_NUM_IMAGES', 'LOST_COCO20K_SHA256'
]

#: Images in LOST's ``datasets/coco_20k_filenames.txt``.
LOST_COCO20K_NUM_IMAGES = 19817
#: sha256 of its file names (folder dropped), sorted, joined by newlines.
LOST_COCO20K_SHA256 = (
    '8e91a7c7c82579ef004ed7590393c4d427ee6ce9680dc9244f901676803b8809')


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


def check_coco20k_list(names: List[str]) -> Optional[str]:
    """None if ``names`` are LOST's 19,817 COCO20k images (in any order),
    else a sentence saying how the list differs."""
    digest = hashlib.sha256('\n'.join(sorted(names)).encode()).hexdigest()
    if digest == LOST_COCO20K_SHA256:
        return None
    return (f"the list has {len(names)} images and is not LOST's "
            f'coco_20k_filenames.txt ({LOST_COCO20K_NUM_IMAGES} images, '
            f'sorted-name sha256 {LOST_COCO20K_SHA256[:12]}...): CorLoc on '
            "it is not comparable with LOST's or the paper's COCO20k rows")


def make_coco20k(ann_file: str, image_list: str, out_file: str) -> Dict:
    """Write the COCO JSON of the listed images; returns a summary.

    Returns:
        ``images``, ``annotations``, ``crowd`` (counts), ``without_boxes``
        (file names of the listed images without any non-crowd box: the
        CorLoc dataset refuses them by default) and ``not_lost`` (None for
        LOST's list, else :func:`check_coco20k_list`'s sentence).

    Raises:
        ValueError: A listed image is not in ``ann_file`` (another split or
            list; all of them are counted, the first ten named),
            duplicates in the list, or a file that is not COCO.
    """
    coco = read_coco_instances(ann_file)
    names = read_image_list(image_list)
    if len(set(names)) != len(names):
        twice = sorted(n for n, k in Counter(names).items() if k > 1)
        raise ValueError(f'{image_list} lists {len(twice)} images twice, '
                         f'e.g. {twice[:10]}')
    by_name = {img['file_name']: img for img in coco['images']}
    missing = [n for n in names if n not in by_name]
    if missing:
        raise ValueError(
            f'{len(missing)} of the {len(names)} images of {image_list} '
            f'are not in {ann_file}, e.g. {missing[:10]}; COCO20k is a '
            'subset of train2014 (instances_train2014.json)')
    images = [by_name[n] for n in names]
    ids = {img['id'] for img in images}
    anns = [a for a in coco['annotations'] if a['image_id'] in ids]
    boxed = {a['image_id'] for a in anns if not a.get('iscrowd', 0)}
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
        crowd=sum(int(a.get('iscrowd', 0)) for a in anns),
        without_boxes=[
            img['file_name'] for img in images if img['id'] not in boxed
        ],
        not_lost=check_coco20k_list(names))
