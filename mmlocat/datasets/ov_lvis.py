"""OV-LVIS: LVIS v1 with the rare categories held out.

Base = frequent + common (866 categories), novel = rare (337), as in
ViLD (Gu et al., ICLR 2022, https://arxiv.org/abs/2104.13921), Detic and
CLIPSelf's F-ViT. Training uses the LVIS v1 train file without the rare
annotations; every image and all 1203 categories are kept so labels stay
those of the full LVIS v1 category list. Evaluation uses the full val file
(mask AP_r = AP on the rare group).
"""
import copy
import json
import os
import os.path as osp
from typing import Dict

__all__ = ['OV_LVIS_TRAIN_FILE', 'make_ov_lvis_base', 'make_ov_lvis_files']

OV_LVIS_TRAIN_FILE = 'lvis_v1_train_norare.json'
_FREQUENCIES = ('r', 'c', 'f')


def make_ov_lvis_base(lvis: Dict) -> Dict:
    """Return a copy of an LVIS dict without rare-category annotations.

    Args:
        lvis: An LVIS v1 annotation dict (not modified); every category
            needs ``frequency`` in ``{'r', 'c', 'f'}``.

    Returns:
        dict: The same images and categories, annotations of frequent and
        common categories only.
    """
    for key in ('images', 'annotations', 'categories'):
        if key not in lvis:
            raise ValueError(f'not an LVIS annotation dict: no {key!r} key')
    rare = set()
    for cat in lvis['categories']:
        freq = cat.get('frequency')
        if freq not in _FREQUENCIES:
            raise ValueError(
                f'category {cat.get("id")} ({cat.get("name")}) has '
                f'frequency {freq!r}; expected one of {_FREQUENCIES}')
        if freq == 'r':
            rare.add(cat['id'])
    cat_ids = {c['id'] for c in lvis['categories']}
    unknown = {a['category_id'] for a in lvis['annotations']} - cat_ids
    if unknown:
        raise ValueError(
            f'annotations use unknown category ids {sorted(unknown)}')
    out = {k: copy.deepcopy(v) for k, v in lvis.items() if k != 'annotations'}
    out['annotations'] = [
        copy.deepcopy(a) for a in lvis['annotations']
        if a['category_id'] not in rare
    ]
    return out


def make_ov_lvis_files(ann_dir: str, out_dir: str) -> Dict[str, str]:
    """Write ``out_dir/lvis_v1_train_norare.json`` from
    ``ann_dir/lvis_v1_train.json``.

    Returns:
        dict: ``{'train': path}`` of the written file.
    """
    src = osp.join(ann_dir, 'lvis_v1_train.json')
    if not osp.isfile(src):
        raise FileNotFoundError(f'LVIS annotation file not found: {src}')
    with open(src, encoding='utf-8') as f:
        lvis = json.load(f)
    out = make_ov_lvis_base(lvis)
    os.makedirs(out_dir, exist_ok=True)
    dst = osp.join(out_dir, OV_LVIS_TRAIN_FILE)
    with open(dst, 'w', encoding='utf-8') as f:
        json.dump(out, f, separators=(',', ':'))
    return dict(train=dst)
