"""Tiny LVIS v1 dataset and its OV-LVIS base-only train file.

Layout as mmdet's ``LVISV1Dataset`` reads it (the image path is the part of
``coco_url`` after the host)::

    root/train2017/%012d.jpg
    root/val2017/%012d.jpg
    root/annotations/lvis_v1_{train,val}.json
    root/annotations/lvis_v1_train_norare.json    (OV-LVIS, no rare anns)

By default categories are the first ``num_classes`` LVIS v1 categories
(real ids and names) with a ``frequency`` that is NOT the real one: the
generator assigns f, c, r in turn so that every group is present. With
``categories='lvis_v1'`` the files list all 1203 real LVIS v1 categories
(ids, names as ``lvis_v1_val.json`` spells them, synsets and frequencies,
from ``mmlocat/testing/data/lvis_v1_categories.json``) and objects are
drawn from a few of them (:data:`LVIS_V1_DRAWN_IDS`). ``image_count`` and
``instance_count`` are counted on the generated train split. Images carry
``not_exhaustive_category_ids`` and ``neg_category_ids`` as LVIS does.
"""
import json
import os.path as osp
from typing import Dict, List, Optional, Tuple

import numpy as np

from mmlocat.datasets.ov_lvis import make_ov_lvis_files
from .coco_writer import VAL_ID_OFFSET, instance_annotations
from .common import (FIXED_DATE, check_sizes, dump_instances_json, image_rng,
                     save_jpg)
from .shapes import draw_scene

__all__ = [
    'LVIS_V1_FIRST_NAMES', 'LVIS_OWNED', 'LVIS_V1_DRAWN_IDS',
    'LVIS_V1_CATEGORIES_FILE', 'lvis_v1_categories', 'write_lvis'
]

# The real LVIS v1 category list (id, name, synset, frequency).
LVIS_V1_CATEGORIES_FILE = osp.join(
    osp.dirname(__file__), 'data', 'lvis_v1_categories.json')
# Categories drawn with categories='lvis_v1': frequent, common and rare
# ones, and 655 (spelled 'speaker_(stero_equipment)' by LVIS).
LVIS_V1_DRAWN_IDS = (3, 655, 1, 17, 13, 14)

LVIS_OWNED = ('train2017', 'val2017', 'annotations')

# The first LVIS v1 categories, ids 1, 2, ... in order.
LVIS_V1_FIRST_NAMES = ('aerosol_can', 'air_conditioner', 'airplane',
                       'alarm_clock', 'alcohol', 'alligator', 'almond',
                       'ambulance', 'amplifier', 'anklet', 'antenna', 'apple',
                       'applesauce', 'apricot', 'apron', 'aquarium',
                       'arctic_(type_of_shoe)', 'armband', 'armchair',
                       'armoire', 'armor', 'artichoke', 'trash_can', 'ashtray')
_FREQUENCIES = ('f', 'c', 'r')


def lvis_v1_categories() -> List[Dict]:
    """The 1203 real LVIS v1 categories, in id order."""
    with open(LVIS_V1_CATEGORIES_FILE, encoding='utf-8') as f:
        cats = json.load(f)
    return sorted(cats, key=lambda c: c['id'])


def _image_info(sub: str, image_id: int, hw, present, num_classes: int,
                rng: np.random.Generator) -> Dict:
    absent = [c for c in range(1, num_classes + 1) if c not in present]
    neg = sorted(
        int(c)
        for c in rng.choice(absent, size=min(2, len(absent)),
                            replace=False)) if absent else []
    # Now and then one present category is marked "not exhaustively
    # annotated", which LVIS evaluation treats specially.
    not_exh = ([int(sorted(present)[0])]
               if present and rng.random() < 0.3 else [])
    file_name = f'{image_id:012d}.jpg'
    return dict(
        id=image_id,
        coco_url=f'http://images.cocodataset.org/{sub}/{file_name}',
        flickr_url='',
        height=hw[0],
        width=hw[1],
        license=1,
        date_captured=FIXED_DATE,
        not_exhaustive_category_ids=not_exh,
        neg_category_ids=neg)


def write_lvis(root: str,
               num_train: int,
               num_val: int,
               img_size: Tuple[int, int],
               seed: int,
               num_classes: int = 12,
               segm_format: str = 'polygon',
               categories: Optional[str] = None) -> Dict:
    """Write a tiny LVIS v1 dataset and the OV-LVIS base-only train file.

    Args:
        root: Dataset root (the ``data_root`` of mmdet LVIS configs).
        num_train, num_val: Images per split.
        img_size: ``(H, W)`` of every image.
        seed: Same seed, same bytes.
        num_classes: Number of categories (at most 24); ignored with
            ``categories='lvis_v1'``.
        segm_format: ``'polygon'`` (as LVIS ships) or ``'rle'``.
        categories: None (the first ``num_classes`` categories, generated
            frequencies) or ``'lvis_v1'`` (all 1203 real categories).
    """
    hw = check_sizes(num_train, num_val, img_size)
    if categories not in (None, 'lvis_v1'):
        raise ValueError(
            f"categories must be None or 'lvis_v1', got {categories!r}")
    real = lvis_v1_categories() if categories == 'lvis_v1' else None
    if real is not None:
        num_classes = len(real)
    elif not 3 <= num_classes <= len(LVIS_V1_FIRST_NAMES):
        raise ValueError('num_classes must be in [3, '
                         f'{len(LVIS_V1_FIRST_NAMES)}], got {num_classes}')
    if segm_format not in ('rle', 'polygon'):
        raise ValueError(
            f"segm_format must be 'rle' or 'polygon', got {segm_format!r}")
    cat_ids = list(range(1, num_classes + 1))
    drawn = ([cat_ids.index(i) for i in LVIS_V1_DRAWN_IDS]
             if real is not None else range(num_classes))
    splits = {}
    for split, num, offset in (('train', num_train, 1), ('val', num_val,
                                                         VAL_ID_OFFSET)):
        images, anns = [], []
        sub = f'{split}2017'
        for i in range(num):
            rng = image_rng(seed, split, i)
            scene = draw_scene(
                rng, hw, object_classes=drawn, num_objects=(1, 4))
            image_id = offset + i
            save_jpg(osp.join(root, sub, f'{image_id:012d}.jpg'), scene.image)
            present = {cat_ids[int(k)] for k in scene.labels}
            images.append(
                _image_info(sub, image_id, hw, present, num_classes, rng))
            anns += instance_annotations(
                scene,
                image_id,
                offset * 100 + len(anns),
                cat_ids,
                segm_format,
                iscrowd=False)
        splits[split] = (images, anns)

    train_anns = splits['train'][1]
    categories = []
    for cid in cat_ids:
        mine = [a for a in train_anns if a['category_id'] == cid]
        if real is not None:
            name, synset = real[cid - 1]['name'], real[cid - 1]['synset']
            freq = real[cid - 1]['frequency']
        else:
            name = LVIS_V1_FIRST_NAMES[cid - 1]
            synset = f'{name}.n.01'
            freq = _FREQUENCIES[(cid - 1) % 3]  # generated, not LVIS's
        # 'def' is a Python keyword, hence the dict literal.
        categories.append({
            'id': cid,
            'name': name,
            'synset': synset,
            'synonyms': [name],
            # Generated, not the real LVIS definition.
            'def': f'synthetic test category {name}',
            'frequency': freq,
            'image_count': len({a['image_id']
                                for a in mine}),
            'instance_count': len(mine)
        })

    ann_dir = osp.join(root, 'annotations')
    paths = dict(data_root=root)
    for split, (images, anns) in splits.items():
        dump_instances_json(
            osp.join(ann_dir, f'lvis_v1_{split}.json'),
            'mmlocat tiny synthetic LVIS v1', images, anns, categories)
        paths[f'{split}_ann_file'] = f'annotations/lvis_v1_{split}.json'
    ov = make_ov_lvis_files(ann_dir, ann_dir)
    paths['ov_train_ann_file'] = osp.relpath(ov['train'], root)
    return paths
