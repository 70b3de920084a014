"""OV-COCO: the 48 base / 17 novel split of COCO 2017 detection.

The split of Bansal et al., "Zero-Shot Object Detection" (ECCV 2018,
https://arxiv.org/abs/1804.04340), as used by OVR-CNN, Detic, CLIPSelf's
F-ViT and mmdet's ``OVCocoMetric``: train on base annotations only, test on
all 65 classes. The file names follow mmdet 3.x's OV-COCO configs.
"""
import copy
import json
import os
import os.path as osp
from typing import Dict, List, Sequence, Tuple

__all__ = [
    'OV_COCO_BASE_CLASSES', 'OV_COCO_NOVEL_CLASSES', 'OV_COCO_CLASSES',
    'OV_COCO_TRAIN_FILE', 'OV_COCO_VAL_FILE', 'SPLIT_LABELS',
    'make_ov_coco_split', 'make_ov_coco_files', 'split_base_names'
]

OV_COCO_BASE_CLASSES = ('person', 'bicycle', 'car', 'motorcycle', 'train',
                        'truck', 'boat', 'bench', 'bird', 'horse', 'sheep',
                        'bear', 'zebra', 'giraffe', 'backpack', 'handbag',
                        'suitcase', 'frisbee', 'skis', 'kite', 'surfboard',
                        'bottle', 'fork', 'spoon', 'bowl', 'banana', 'apple',
                        'sandwich', 'orange', 'broccoli', 'carrot', 'pizza',
                        'donut', 'chair', 'bed', 'toilet', 'tv', 'laptop',
                        'mouse', 'remote', 'microwave', 'oven', 'toaster',
                        'refrigerator', 'book', 'clock', 'vase', 'toothbrush')
OV_COCO_NOVEL_CLASSES = ('airplane', 'bus', 'cat', 'dog', 'cow', 'elephant',
                         'umbrella', 'tie', 'snowboard', 'skateboard', 'cup',
                         'knife', 'cake', 'couch', 'keyboard', 'sink',
                         'scissors')

#: The ``split`` labels of OV split-file categories and what they mean:
#: ``base`` / ``novel`` (ours, mmdet's) and OVR-CNN's ``seen`` / ``unseen``
#: (kept by the split files of CLIPSelf's F-ViT and Detic).
SPLIT_LABELS = dict(base='base', seen='base', novel='novel', unseen='novel')

OV_COCO_TRAIN_FILE = 'instances_train2017_seen_2.json'
OV_COCO_VAL_FILE = 'instances_val2017_all_2.json'

# The 65 classes in official COCO id order: the order of the categories of
# both split files, hence of dataset labels.
OV_COCO_CLASSES = ('person', 'bicycle', 'car', 'motorcycle', 'airplane', 'bus',
                   'train', 'truck', 'boat', 'bench', 'bird', 'cat', 'dog',
                   'horse', 'sheep', 'cow', 'elephant', 'bear', 'zebra',
                   'giraffe', 'backpack', 'umbrella', 'handbag', 'tie',
                   'suitcase', 'frisbee', 'skis', 'snowboard', 'kite',
                   'skateboard', 'surfboard', 'bottle', 'cup', 'fork', 'knife',
                   'spoon', 'bowl', 'banana', 'apple', 'sandwich', 'orange',
                   'broccoli', 'carrot', 'pizza', 'donut', 'cake', 'chair',
                   'couch', 'bed', 'toilet', 'tv', 'laptop', 'mouse', 'remote',
                   'keyboard', 'microwave', 'oven', 'toaster', 'sink',
                   'refrigerator', 'book', 'clock', 'vase', 'scissors',
                   'toothbrush')


def _filter(coco: Dict, keep_names, split_of) -> Dict:
    """Keep categories named in ``keep_names``, their annotations and the
    images that still have an annotation (as the standard split files)."""
    out = {
        k: copy.deepcopy(v)
        for k, v in coco.items()
        if k not in ('images', 'annotations', 'categories')
    }
    cats = []
    for cat in coco['categories']:
        if cat['name'] in keep_names:
            cat = dict(cat, split=split_of[cat['name']])
            cats.append(cat)
    keep_ids = {c['id'] for c in cats}
    anns = [
        copy.deepcopy(a) for a in coco['annotations']
        if a['category_id'] in keep_ids
    ]
    used = {a['image_id'] for a in anns}
    out['images'] = [
        copy.deepcopy(img) for img in coco['images'] if img['id'] in used
    ]
    out['annotations'] = anns
    out['categories'] = cats
    return out


def split_base_names(categories: Sequence[Dict],
                     source: str = 'the annotation file') -> List[str]:
    """The base class names of split-file categories (with ``split``).

    ``base`` and OVR-CNN's ``seen`` are base, ``novel`` and ``unseen``
    novel (:data:`SPLIT_LABELS`); names come in the given order.

    Args:
        categories: COCO-style category dicts, each with ``name`` and
            ``split``.
        source: Name of the file in error messages.

    Raises:
        ValueError: A category without ``split`` or with another label, or
            no base category at all (never an empty base list).
    """
    base, labels = [], set()
    for cat in categories:
        label = cat.get('split')
        if label not in SPLIT_LABELS:
            raise ValueError(
                f'{source}: category {cat.get("id")} ({cat.get("name")!r}) '
                f'has split {label!r}; expected one of {sorted(SPLIT_LABELS)}'
                ' (base/novel, or OVR-CNN\'s seen/unseen) on every category')
        labels.add(label)
        if SPLIT_LABELS[label] == 'base':
            base.append(cat['name'])
    if not base:
        raise ValueError(
            f'{source}: no base category (split labels {sorted(labels)}); '
            'an OV split file needs base (or seen) categories')
    return base


def make_ov_coco_split(coco: Dict,
                       keep_novel_categories: bool = False
                       ) -> Tuple[Dict, Dict]:
    """Make the OV-COCO base-only and all-65 versions of a COCO dict.

    Args:
        coco: A COCO ``instances_*2017.json`` dict (not modified).
        keep_novel_categories: If True the base-only dict still lists the
            17 novel categories (without annotations), so that labels index
            the 65 classes; by default it lists only the 48 base ones, as
            mmdet's split files do.

    Returns:
        tuple[dict, dict]: ``(base_train, all65)``: base annotations only
        (images without any dropped), and annotations of all 65 classes.
        Each kept category gains ``split`` = ``'base'`` or ``'novel'``.
    """
    for key in ('images', 'annotations', 'categories'):
        if key not in coco:
            raise ValueError(f'not a COCO instances dict: no {key!r} key')
    names = [c['name'] for c in coco['categories']]
    missing = [n for n in OV_COCO_CLASSES if n not in names]
    if missing:
        raise ValueError(f'COCO categories lack OV-COCO classes {missing}')
    cat_ids = {c['id'] for c in coco['categories']}
    unknown = {a['category_id'] for a in coco['annotations']} - cat_ids
    if unknown:
        raise ValueError(
            f'annotations use unknown category ids {sorted(unknown)}')
    split_of = {n: 'base' for n in OV_COCO_BASE_CLASSES}
    split_of.update({n: 'novel' for n in OV_COCO_NOVEL_CLASSES})
    base = _filter(coco, set(OV_COCO_BASE_CLASSES), split_of)
    if keep_novel_categories:
        base['categories'] = [
            dict(c, split=split_of[c['name']]) for c in coco['categories']
            if c['name'] in split_of
        ]
    all65 = _filter(coco, set(OV_COCO_CLASSES), split_of)
    return base, all65


def make_ov_coco_files(ann_dir: str,
                       out_dir: str,
                       keep_novel_categories: bool = False) -> Dict[str, str]:
    """Write the OV-COCO split files from the official annotation files.

    Reads ``ann_dir/instances_{train,val}2017.json`` and writes
    ``out_dir/instances_train2017_seen_2.json`` (base only) and
    ``out_dir/instances_val2017_all_2.json`` (all 65 classes).

    Returns:
        dict: ``{'train': path, 'val': path}`` of the written files.
    """
    paths = {}
    for split, out_name, pick in (('train', OV_COCO_TRAIN_FILE, 0),
                                  ('val', OV_COCO_VAL_FILE, 1)):
        src = osp.join(ann_dir, f'instances_{split}2017.json')
        if not osp.isfile(src):
            raise FileNotFoundError(f'COCO annotation file not found: {src}')
        with open(src, encoding='utf-8') as f:
            coco = json.load(f)
        out = make_ov_coco_split(coco, keep_novel_categories)[pick]
        os.makedirs(out_dir, exist_ok=True)
        dst = osp.join(out_dir, out_name)
        with open(dst, 'w', encoding='utf-8') as f:
            json.dump(out, f, separators=(',', ':'))
        paths[split] = dst
    return paths
