"""Tiny captioned image sets: one drawn shape per image, captioned.

Each image shows one shape (star, ring, triangle, rectangle) of one colour
(red, green, blue, yellow) on one background (checkerboard, stripes, plain
grey) with a random pose and pixel noise; its captions name all three ("a
red star on a checkerboard", "a checkerboard with a red star"), so a tiny
CLIP learns to match them. Layout under ``root``::

    train2017/000000.jpg ...            val2017/000000.jpg ...
    annotations/captions_{train,val}2017.json    (COCO Captions)
    annotations/{train,val}.tsv                  (path<TAB>caption)
    zeroshot/val/<colour>_<shape>/*.JPEG         (ImageNet folder)
    zeroshot/meta/val.txt, zeroshot/meta/classes.txt   ("red star", ...)
    shards/{train,val}-000000.tar ...   (with ``shards=N``: webdataset
                                         tar shards, ``key.jpg`` + ``key.txt``,
                                         and img2dataset's ``_stats.json``)
"""
import json
import os
import os.path as osp
from typing import Dict, List, Tuple

import numpy as np

from .common import check_sizes, dump_json, image_rng, jpg_bytes, save_jpg
from .shapes import _shape_mask

__all__ = [
    'CAPTIONS_OWNED', 'CC3M_OWNED', 'CC3M_SHARDS', 'CAPTION_COLOURS',
    'CAPTION_SHAPES', 'CAPTION_BACKGROUNDS', 'caption_class_names',
    'write_captions', 'write_cc3m'
]

CAPTIONS_OWNED = ('train2017', 'val2017', 'annotations', 'zeroshot', 'shards')
CAPTION_COLOURS = dict(
    red=(220, 30, 30),
    green=(30, 190, 40),
    blue=(30, 60, 230),
    yellow=(235, 220, 20))
CAPTION_SHAPES = ('star', 'ring', 'triangle', 'rectangle')
CAPTION_BACKGROUNDS = ('checkerboard', 'stripes', 'plain background')


def caption_class_names() -> List[str]:
    """The zero-shot classes ``'<colour> <shape>'``, in label order."""
    return [f'{c} {s}' for s in CAPTION_SHAPES for c in CAPTION_COLOURS]


def _background(kind: str, hw: Tuple[int, int],
                rng: np.random.Generator) -> np.ndarray:
    h, w = hw
    ys, xs = np.mgrid[0:h, 0:w]
    light, dark = rng.uniform(170, 230), rng.uniform(40, 90)
    cell = max(2, min(h, w) // 8)
    if kind == 'checkerboard':
        sel = ((xs // cell) + (ys // cell)) % 2 == 1
    elif kind == 'stripes':
        sel = (xs // cell) % 2 == 1
    else:
        sel = np.zeros((h, w), dtype=bool)
        light = rng.uniform(110, 150)
    grey = np.where(sel, dark, light).astype(np.float32)
    return np.repeat(grey[..., None], 3, axis=2)


def _draw(rng: np.random.Generator, hw: Tuple[int, int], colour: str,
          shape: str, background: str) -> np.ndarray:
    h, w = hw
    image = _background(background, hw, rng)
    r = 0.5 * rng.uniform(0.5, 0.8) * min(h, w)
    cx = rng.uniform(r, max(r, w - 1 - r))
    cy = rng.uniform(r, max(r, h - 1 - r))
    mask = _shape_mask(shape, hw, cx, cy, r, rng.uniform(0.75, 1.0),
                       rng.uniform(0, 2 * np.pi))
    image[mask] = CAPTION_COLOURS[colour]
    image += rng.normal(0.0, 4.0, size=image.shape)
    return np.clip(np.round(image), 0, 255).astype(np.uint8)


def _captions(colour: str, shape: str, background: str) -> List[str]:
    return [
        f'a {colour} {shape} on a {background}',
        f'a {background} with a {colour} {shape}'
    ]


def _look(index: int, rng: np.random.Generator) -> Tuple[str, str, str]:
    colours = list(CAPTION_COLOURS)
    colour = colours[index % len(colours)]
    shape = CAPTION_SHAPES[(index // len(colours)) % len(CAPTION_SHAPES)]
    background = CAPTION_BACKGROUNDS[int(
        rng.integers(len(CAPTION_BACKGROUNDS)))]
    return colour, shape, background


def _write_split(root: str, split: str, num: int, hw: Tuple[int, int],
                 seed: int) -> None:
    folder = f'{split}2017'
    images, annotations, tsv = [], [], []
    for i in range(num):
        rng = image_rng(seed, split, i)
        colour, shape, background = _look(i, rng)
        name = f'{i:06d}.jpg'
        save_jpg(
            osp.join(root, folder, name),
            _draw(rng, hw, colour, shape, background))
        images.append(dict(id=i, file_name=name, height=hw[0], width=hw[1]))
        for caption in _captions(colour, shape, background):
            annotations.append(
                dict(id=len(annotations), image_id=i, caption=caption))
            tsv.append(f'{folder}/{name}\t{caption}\n')
    dump_json(
        osp.join(root, 'annotations', f'captions_{split}2017.json'),
        dict(images=images, annotations=annotations))
    with open(osp.join(root, 'annotations', f'{split}.tsv'), 'w') as f:
        f.write(''.join(tsv))


def _write_tar(path: str, samples: List[Tuple[str, bytes, List[str]]]) -> None:
    """``(key, jpg bytes, captions)`` samples as one webdataset tar shard
    (webdataset's own ``TarWriter``; captions one a line in ``key.txt``)
    plus img2dataset's per-shard record ``<stem>_stats.json``, which the
    dataset checks."""
    from mmlocat.datasets.caption_shards import (import_webdataset,
                                                 recorded_count_file)
    wds = import_webdataset()
    os.makedirs(osp.dirname(path), exist_ok=True)
    # mtime fixed: same arguments, same bytes
    with wds.TarWriter(path, mtime=0.0) as sink:
        for key, jpg, captions in samples:
            sink.write({
                '__key__': key,
                'jpg': jpg,
                'txt': '\n'.join(captions)
            })
    dump_json(
        recorded_count_file(path),
        dict(count=len(samples), successes=len(samples)))


def _write_shards(root: str, split: str, num: int, shards: int) -> str:
    """The split's images (the same JPEG bytes) and captions as ``shards``
    webdataset tar shards; returns the shard list pattern."""
    folder = f'{split}2017'
    with open(osp.join(root, 'annotations', f'captions_{folder}.json')) as f:
        captions: Dict[int, List[str]] = {}
        for ann in json.load(f)['annotations']:
            captions.setdefault(ann['image_id'], []).append(ann['caption'])
    per_shard = -(-num // shards)
    for k in range(shards):
        samples = []
        for i in range(k * per_shard, min(num, (k + 1) * per_shard)):
            with open(osp.join(root, folder, f'{i:06d}.jpg'), 'rb') as f:
                samples.append((f'{i:06d}', f.read(), captions[i]))
        _write_tar(osp.join(root, 'shards', f'{split}-{k:06d}.tar'), samples)
    return f'shards/{split}-{{000000..{shards - 1:06d}}}.tar'


#: Shards of the LaSt-CLIP recipes' CC3M (``configs/last/_base_/
#: clip_cc3m.py``: img2dataset's ``{00000..00331}.tar``).
CC3M_SHARDS = 332
CC3M_OWNED = tuple(f'{k:05d}{ext}' for k in range(CC3M_SHARDS)
                   for ext in ('.tar', '_stats.json'))


def write_cc3m(root: str,
               num_train: int,
               num_val: int,
               img_size: Tuple[int, int],
               seed: int,
               shards: int = CC3M_SHARDS) -> Dict:
    """CC3M as img2dataset writes it: ``root/{00000..NNNNN}.tar`` (keys
    ``<shard:05d><index:04d>``, ``key.jpg`` + ``key.txt``) and
    ``root/NNNNN_stats.json``; every shard the recipes list exists.

    Args:
        root: Output folder (the recipes' ``data/cc3m``).
        num_train: Distinct captioned images, spread over the shards
            (each shard holds at least one; they repeat if fewer).
        num_val: Unused (CC3M's validation is not read by the recipes).
        img_size: ``(H, W)``.
        seed: Same seed, same bytes.
        shards: Number of shards (the recipes list 332).
    """
    hw = check_sizes(num_train, max(num_val, 1), img_size)
    drawn: Dict[int, Tuple[bytes, List[str]]] = {}
    per_shard = max(1, -(-num_train // shards))
    for k in range(shards):
        samples = []
        for j in range(per_shard):
            # fewer images than shards: they repeat (each shard holds one)
            index = (k * per_shard + j) % num_train
            if index not in drawn:
                rng = image_rng(seed, 'train', index)
                look = _look(index, rng)
                drawn[index] = (jpg_bytes(_draw(rng, hw,
                                                *look)), _captions(*look))
            samples.append((f'{k:05d}{j:04d}', ) + drawn[index])
        _write_tar(osp.join(root, f'{k:05d}.tar'), samples)
    return dict(data_root=root, ann_file=f'{{00000..{shards - 1:05d}}}.tar')


def _write_zeroshot(root: str, per_class: int, hw: Tuple[int, int],
                    seed: int) -> None:
    names = caption_class_names()
    lines = []
    for label, name in enumerate(names):
        colour, shape = name.split(' ')
        for k in range(per_class):
            index = 10000 + label * per_class + k
            rng = image_rng(seed, 'val', index)
            background = CAPTION_BACKGROUNDS[k % len(CAPTION_BACKGROUNDS)]
            rel = f'{colour}_{shape}/{k:04d}.JPEG'
            save_jpg(
                osp.join(root, 'zeroshot', 'val', rel),
                _draw(rng, hw, colour, shape, background))
            lines.append(f'{rel} {label}\n')
    os.makedirs(osp.join(root, 'zeroshot', 'meta'), exist_ok=True)
    with open(osp.join(root, 'zeroshot', 'meta', 'val.txt'), 'w') as f:
        f.write(''.join(lines))
    with open(osp.join(root, 'zeroshot', 'meta', 'classes.txt'), 'w') as f:
        f.write(''.join(f'{n}\n' for n in names))


def write_captions(root: str,
                   num_train: int,
                   num_val: int,
                   img_size: Tuple[int, int],
                   seed: int,
                   zeroshot_per_class: int = 2,
                   shards: int = 0) -> Dict:
    """Write the captioned train / val sets and the zero-shot folder.

    Args:
        root: Output folder (``data_root``).
        num_train, num_val: Images in each split (2 captions each); the
            colour and shape cycle with the image index, so 16 images cover
            every (colour, shape) pair.
        img_size: ``(H, W)``.
        seed: Same seed, same bytes.
        zeroshot_per_class: Zero-shot images per ``'<colour> <shape>'``
            class.
        shards: Also write each split as this many webdataset shards
            (needs ``webdataset``; 0: none).
    """
    hw = check_sizes(num_train, num_val, img_size)
    if zeroshot_per_class < 1:
        raise ValueError(f'zeroshot_per_class must be >= 1, got '
                         f'{zeroshot_per_class}')
    if not 0 <= shards <= min(num_train, num_val):
        raise ValueError(f'shards must be in [0, {min(num_train, num_val)}]'
                         f' (one image each at least), got {shards}')
    _write_split(root, 'train', num_train, hw, seed)
    _write_split(root, 'val', num_val, hw, seed)
    _write_zeroshot(root, zeroshot_per_class, hw, seed)
    extra = {
        f'{split}_shards': _write_shards(root, split, num, shards)
        for split, num in (('train', num_train), ('val', num_val))
    } if shards else {}
    return dict(
        **extra,
        data_root=root,
        train_ann_file='annotations/captions_train2017.json',
        val_ann_file='annotations/captions_val2017.json',
        train_tsv='annotations/train.tsv',
        val_tsv='annotations/val.tsv',
        train_prefix='train2017/',
        val_prefix='val2017/',
        zeroshot_root=osp.join(root, 'zeroshot'),
        zeroshot_ann_file='meta/val.txt',
        zeroshot_classes='meta/classes.txt',
        classes=caption_class_names())
