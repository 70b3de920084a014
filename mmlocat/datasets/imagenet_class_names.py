"""ImageNet-1k class names for CLIP zero-shot classification.

Two lists, both in ImageNet's label order (the order of mmpretrain's
``ImageNet`` dataset):

* ``'open_clip'`` (the default of mmlocat's ImageNet zero-shot path):
  open_clip's curated ``IMAGENET_CLASSNAMES``
  (https://github.com/mlfoundations/open_clip, MIT; shipped as
  ``data/imagenet_open_clip.txt``), which open_clip's zero-shot evaluation
  fills into the 80 OpenAI templates
  (``TEMPLATE_SETS['imagenet80']`` of :mod:`mmlocat.text.templates`). Two
  names occur twice in it (``missile``, ``sunglasses``): both classes get
  the same embedding, as in open_clip
  (:func:`mmlocat.text.write_text_embeddings` with ``repeated_names``).
* ``'wordnet'``: mmpretrain's ``IMAGENET_CATEGORIES`` (WordNet synonym
  strings, e.g. ``'tench, Tinca tinca'``).

Config files name a list as ``'imagenet_open_clip'`` / ``'imagenet_wordnet'``
wherever class names are read (:func:`mmlocat.text.resolve_class_names`).
"""
import os.path as osp
from typing import List

from mmlocat.text.class_names import read_class_names

__all__ = [
    'IMAGENET_NAME_SOURCES', 'IMAGENET_OPEN_CLIP_FILE', 'imagenet_class_names'
]

IMAGENET_NAME_SOURCES = ('open_clip', 'wordnet')
IMAGENET_OPEN_CLIP_FILE = osp.join(
    osp.dirname(osp.abspath(__file__)), 'data', 'imagenet_open_clip.txt')


def imagenet_class_names(source: str = 'open_clip') -> List[str]:
    """The 1,000 ImageNet-1k class names of ``source`` in label order."""
    if source == 'open_clip':
        names = read_class_names(IMAGENET_OPEN_CLIP_FILE)
    elif source == 'wordnet':
        from mmpretrain.datasets.categories import IMAGENET_CATEGORIES
        names = list(IMAGENET_CATEGORIES)
    else:
        raise ValueError(f'ImageNet class names come from one of '
                         f'{IMAGENET_NAME_SOURCES}, got {source!r}')
    if len(names) != 1000:
        raise ValueError(f'{source}: {len(names)} ImageNet class names, '
                         'expected 1000')
    return names
