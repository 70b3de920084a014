"""Tiny COCO-Object dataset: the tiny COCO 2017 instances of
:func:`mmlocat.testing.coco_writer.write_coco` plus their COCO-Object maps
(:func:`mmlocat.datasets.coco_object.convert_coco_object`) under
``root/coco_object/{train,val}2017/*_instanceTrainIds.png``."""
import os.path as osp
from typing import Dict, Tuple

from mmlocat.datasets.coco_object import convert_coco_object
from .coco_writer import COCO_OWNED, write_coco

__all__ = ['write_coco_object', 'COCO_OBJECT_OWNED']

COCO_OBJECT_OWNED = COCO_OWNED + ('coco_object', )


def write_coco_object(root: str, num_train: int, num_val: int,
                      img_size: Tuple[int,
                                      int], seed: int, **coco_options) -> Dict:
    """Write COCO instances (see ``write_coco``) and convert both splits.
    """
    paths = write_coco(root, num_train, num_val, img_size, seed,
                       **coco_options)
    for split in ('train', 'val'):
        convert_coco_object(
            osp.join(root, paths[f'{split}_ann_file']),
            osp.join(root, 'coco_object', f'{split}2017'))
        paths[f'{split}_seg_dir'] = f'coco_object/{split}2017'
    return paths
