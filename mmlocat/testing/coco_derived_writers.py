"""What the LaSt recipes read from ``data/coco`` beside COCO 2017
instances, derived from the tiny COCO of
:func:`mmlocat.testing.coco_writer.write_coco` in the same folder (as in
``data/``; :func:`mmlocat.testing.generate` writes the COCO first):

* ``derive_coco20k``: COCO20k for CorLoc (``configs/last/corloc_*_coco20k.py``
  read ``annotations/coco20k.json`` and ``train2014/``). The train images
  are copied under their COCO 2014 names into ``train2014/``, their
  instances written as ``annotations/instances_train2014.json`` with a
  LOST-style list ``annotations/coco20k_filenames.txt``, and the real
  converter (:func:`mmlocat.datasets.coco20k.make_coco20k`, what
  ``tools/dataset_converters/coco20k.py`` runs) writes
  ``annotations/coco20k.json``.
* ``derive_coco_captions``: COCO Captions
  (``annotations/captions_{train,val}2017.json``) naming each image's
  objects. The LaSt-CLIP ``*_coco-caption-no-lvis-val.py`` recipes leave
  out the images of LVIS v1 val (``exclude_ids``), which in the real data
  come partly from COCO train2017, and the dataset refuses an exclusion
  list that matches none of its images; so train2017 gets one more image
  with the id of the tiny LVIS v1 val's first image
  (:func:`mmlocat.testing.lvis_writer.write_lvis`: ``VAL_ID_OFFSET``).
"""
import json
import os
import os.path as osp
import shutil
from typing import Dict, List

from mmlocat.datasets.coco20k import make_coco20k
from .coco_writer import VAL_ID_OFFSET
from .common import dump_json

__all__ = [
    'COCO20K_OWNED', 'COCO_CAPTIONS_OWNED', 'derive_coco20k',
    'derive_coco_captions'
]

COCO20K_OWNED = ('train2014', 'annotations/instances_train2014.json',
                 'annotations/coco20k_filenames.txt',
                 'annotations/coco20k.json')
_EXTRA_TRAIN = f'train2017/{VAL_ID_OFFSET:012d}.jpg'
COCO_CAPTIONS_OWNED = ('annotations/captions_train2017.json',
                       'annotations/captions_val2017.json', _EXTRA_TRAIN)


def _load(root: str, rel: str) -> Dict:
    with open(osp.join(root, rel), encoding='utf-8') as f:
        return json.load(f)


def derive_coco20k(root: str, coco_paths: Dict) -> Dict:
    """Write COCO20k from the tiny COCO train2017 of ``root``."""
    coco = _load(root, coco_paths['train_ann_file'])
    names = []
    for image in coco['images']:
        name = f'COCO_train2014_{image["id"]:012d}.jpg'
        dst = osp.join(root, 'train2014', name)
        os.makedirs(osp.dirname(dst), exist_ok=True)
        shutil.copyfile(
            osp.join(root, coco_paths['train_img_dir'], image['file_name']),
            dst)
        image['file_name'] = name
        image['coco_url'] = f'http://images.cocodataset.org/train2014/{name}'
        names.append(f'train2014/{name}')
    ann_file = osp.join(root, COCO20K_OWNED[1])
    dump_json(ann_file, coco)
    image_list = osp.join(root, COCO20K_OWNED[2])
    with open(image_list, 'w', encoding='utf-8') as f:
        f.write(''.join(f'{n}\n' for n in names))
    make_coco20k(ann_file, image_list, osp.join(root, COCO20K_OWNED[3]))
    return dict(
        data_root=root,
        ann_file=COCO20K_OWNED[3],
        img_dir='train2014/',
        image_list=COCO20K_OWNED[2])


def _captions(coco: Dict) -> List[Dict]:
    names = {c['id']: c['name'] for c in coco['categories']}
    objects: Dict[int, List[str]] = {i['id']: [] for i in coco['images']}
    for ann in coco['annotations']:
        name = names[ann['category_id']]
        if name not in objects[ann['image_id']]:
            objects[ann['image_id']].append(name)
    out = []
    for image_id, found in objects.items():
        what = ' and a '.join(found) if found else 'nothing'
        for caption in (f'a photo of a {what}', f'a picture with a {what}'):
            out.append(dict(id=len(out), image_id=image_id, caption=caption))
    return out


def derive_coco_captions(root: str, coco_paths: Dict) -> Dict:
    """Write COCO Captions for the tiny COCO 2017 of ``root``."""
    paths = dict(data_root=root)
    for split in ('train', 'val'):
        coco = _load(root, coco_paths[f'{split}_ann_file'])
        images = [{
            k: i[k]
            for k in ('id', 'file_name', 'height', 'width')
        } for i in coco['images']]
        annotations = _captions(coco)
        if split == 'train':
            first = images[0]
            shutil.copyfile(
                osp.join(root, coco_paths['train_img_dir'],
                         first['file_name']), osp.join(root, _EXTRA_TRAIN))
            images.append(
                dict(
                    first,
                    id=VAL_ID_OFFSET,
                    file_name=osp.basename(_EXTRA_TRAIN)))
            annotations += [
                dict(a, id=len(annotations) + k, image_id=VAL_ID_OFFSET)
                for k, a in enumerate(
                    a for a in annotations if a['image_id'] == first['id'])
            ]
        rel = f'annotations/captions_{split}2017.json'
        dump_json(
            osp.join(root, rel), dict(images=images, annotations=annotations))
        paths[f'{split}_ann_file'] = rel
        paths[f'{split}_img_dir'] = f'{split}2017/'
    return paths
