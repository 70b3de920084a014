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

COCO-Object is a conversion of a dataset in the same folder, as in
``data/``: :func:`derive_coco_object` / :func:`derive_coco_object_stuff`
convert a tiny COCO / COCO-Stuff already written there
(:func:`mmlocat.testing.generate` writes it first and shares it with the
``coco`` / ``coco_stuff`` kinds).
"""
import os.path as osp
from typing import Dict, Tuple

from mmlocat.datasets.coco_object import (convert_coco_object,
                                          convert_coco_stuff_object)
from .coco_writer import COCO_OWNED, write_coco
from .seg_writers import COCO_STUFF_OWNED, write_coco_stuff

__all__ = [
    'write_coco_object', 'write_coco_object_stuff', 'derive_coco_object',
    'derive_coco_object_stuff', 'COCO_OBJECT_OWNED', 'COCO_OBJECT_STUFF_OWNED',
    'DERIVED_OWNED'
]

#: What a derived COCO-Object adds to its source's folder.
DERIVED_OWNED = ('coco_object', )
COCO_OBJECT_OWNED = COCO_OWNED + DERIVED_OWNED
COCO_OBJECT_STUFF_OWNED = COCO_STUFF_OWNED + DERIVED_OWNED


def _convert_splits(root: str, paths: Dict, source_key: str, convert) -> Dict:
    """Convert both splits' ``paths[f'{split}_{source_key}']`` into
    ``root/coco_object/{split}2017`` and record them as ``*_seg_dir``."""
    for split in ('train', 'val'):
        convert(
            osp.join(root, paths[f'{split}_{source_key}']),
            osp.join(root, 'coco_object', f'{split}2017'))
        paths[f'{split}_seg_dir'] = f'coco_object/{split}2017'
    return paths


def derive_coco_object(root: str, coco_paths: Dict) -> Dict:
    """Convert the tiny COCO of ``root`` (``write_coco``'s ``coco_paths``)
    into ``root/coco_object``; returns its paths plus ``*_seg_dir``."""
    return _convert_splits(root, dict(coco_paths), 'ann_file',
                           convert_coco_object)


def derive_coco_object_stuff(root: str, stuff_paths: Dict) -> Dict:
    """Convert the tiny COCO-Stuff of ``root`` (``write_coco_stuff``'s
    ``stuff_paths``) into ``root/coco_object``."""
    return _convert_splits(root, dict(stuff_paths), 'ann_dir',
                           convert_coco_stuff_object)


def write_coco_object(root: str, num_train: int, num_val: int,
                      img_size: Tuple[int,
                                      int], seed: int, **coco_options) -> Dict:
    """Write COCO instances (see ``write_coco``) and convert both splits.
    """
    return derive_coco_object(
        root,
        write_coco(root, num_train, num_val, img_size, seed, **coco_options))


def write_coco_object_stuff(root: str, num_train: int, num_val: int,
                            img_size: Tuple[int, int], seed: int,
                            **stuff_options) -> Dict:
    """Write COCO-Stuff-164k (see ``write_coco_stuff``) and convert the
    original maps of both splits."""
    return derive_coco_object_stuff(
        root,
        write_coco_stuff(root, num_train, num_val, img_size, seed,
                         **stuff_options))
