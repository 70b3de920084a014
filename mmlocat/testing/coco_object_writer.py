"""Tiny COCO-Object datasets in both conversions of
:mod:`mmlocat.datasets.coco_object`:

* ``write_coco_object_stuff``: the tiny COCO-Stuff-164k of
  :func:`mmlocat.testing.seg_writers.write_coco_stuff` (with its original
  maps) converted as GroupViT / SCLIP do
  (:func:`~mmlocat.datasets.coco_object.convert_coco_stuff_object`) under
  ``root/coco_object/{train,val}2017/*_instanceTrainIds.png``;
* ``write_coco_object``: the tiny COCO 2017 instances of
  :func:`mmlocat.testing.coco_writer.write_coco` drawn into maps
  (:func:`~mmlocat.datasets.coco_object.convert_coco_object`) under the
  same folders.
"""
import os.path as osp
from typing import Dict, Tuple

from mmlocat.datasets.coco_object import (convert_coco_object,
                                          convert_coco_stuff_object)
from .coco_writer import COCO_OWNED, write_coco
from .seg_writers import COCO_STUFF_OWNED, write_coco_stuff

__all__ = [
    'write_coco_object', 'write_coco_object_stuff', 'COCO_OBJECT_OWNED',
    'COCO_OBJECT_STUFF_OWNED'
]

COCO_OBJECT_OWNED = COCO_OWNED + ('coco_object', )
COCO_OBJECT_STUFF_OWNED = COCO_STUFF_OWNED + ('coco_object', )


def _convert_splits(root: str, paths: Dict, source_key: str, convert) -> Dict:
    """Convert both splits' ``paths[f'{split}_{source_key}']`` into
    ``root/coco_object/{split}2017`` and record them as ``*_seg_dir``."""
    for split in ('train', 'val'):
        convert(
            osp.join(root, paths[f'{split}_{source_key}']),
            osp.join(root, 'coco_object', f'{split}2017'))
        paths[f'{split}_seg_dir'] = f'coco_object/{split}2017'
    return paths


def write_coco_object(root: str, num_train: int, num_val: int,
                      img_size: Tuple[int,
                                      int], seed: int, **coco_options) -> Dict:
    """Write COCO instances (see ``write_coco``) and convert both splits.
    """
    paths = write_coco(root, num_train, num_val, img_size, seed,
                       **coco_options)
    return _convert_splits(root, paths, 'ann_file', convert_coco_object)


def write_coco_object_stuff(root: str, num_train: int, num_val: int,
                            img_size: Tuple[int, int], seed: int,
                            **stuff_options) -> Dict:
    """Write COCO-Stuff-164k (see ``write_coco_stuff``) and convert the
    original maps of both splits."""
    paths = write_coco_stuff(root, num_train, num_val, img_size, seed,
                             **stuff_options)
    return _convert_splits(root, paths, 'ann_dir', convert_coco_stuff_object)
