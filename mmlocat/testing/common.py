"""File helpers shared by the tiny-dataset writers.

Writers must be byte-for-byte deterministic: images are encoded with fixed
settings, JSON is dumped with a fixed layout and nothing records the time.
"""
import io
import json
import os
import os.path as osp
import xml.etree.ElementTree as ET
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np
from PIL import Image

__all__ = [
    'FIXED_DATE', 'image_rng', 'jpg_bytes', 'save_jpg', 'save_png',
    'dump_json', 'dump_instances_json', 'evenly_spaced', 'check_sizes',
    'add_voc_object'
]

# The one date written into COCO-style files (no wall clock: deterministic).
FIXED_DATE = '2017-01-01 00:00:00'

# Index of each split in the per-image seed, so that image i of a split is
# the same whatever the number of images asked for.
_SPLIT_INDEX = {'train': 0, 'val': 1}


def image_rng(seed: int, split: str, index: int) -> np.random.Generator:
    """Independent generator for image ``index`` of ``split``."""
    return np.random.default_rng([int(seed), _SPLIT_INDEX[split], index])


def _parent(path: str) -> None:
    os.makedirs(osp.dirname(path) or '.', exist_ok=True)


def jpg_bytes(image: np.ndarray) -> bytes:
    """An ``(H, W, 3)`` uint8 RGB array encoded as JPEG."""
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise ValueError('a JPEG takes an (H, W, 3) uint8 array, got '
                         f'{image.dtype} {image.shape}')
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format='JPEG', quality=95, subsampling=0)
    return buf.getvalue()


def save_jpg(path: str, image: np.ndarray) -> None:
    """Save an ``(H, W, 3)`` uint8 RGB array as a JPEG."""
    data = jpg_bytes(image)
    _parent(path)
    with open(path, 'wb') as f:
        f.write(data)


def save_png(path: str, label: np.ndarray) -> None:
    """Save an ``(H, W)`` label map with values in [0, 255] as 8-bit PNG."""
    if label.ndim != 2:
        raise ValueError(f'save_png expects an (H, W) map, got {label.shape}')
    if label.size and (label.min() < 0 or label.max() > 255):
        raise ValueError('label values must lie in [0, 255], got '
                         f'[{label.min()}, {label.max()}]')
    _parent(path)
    Image.fromarray(label.astype(np.uint8)).save(path, format='PNG')


def dump_json(path: str, obj: Any) -> None:
    """Dump JSON with a fixed layout (deterministic bytes)."""
    _parent(path)
    with open(path, 'w', encoding='utf-8') as f:
        json.dump(obj, f, sort_keys=False, separators=(',', ':'))


def dump_instances_json(path: str, description: str, images: List[Dict],
                        annotations: List[Dict],
                        categories: List[Dict]) -> None:
    """Dump a COCO-style instances file (COCO and LVIS v1 share the layout):
    ``info`` (``description``, :data:`FIXED_DATE`), one synthetic licence,
    ``images``, ``annotations`` and ``categories``."""
    dump_json(
        path,
        dict(
            info=dict(
                description=description,
                version='1.0',
                year=2017,
                date_created=FIXED_DATE),
            licenses=[dict(id=1, name='synthetic', url='')],
            images=images,
            annotations=annotations,
            categories=categories))


def evenly_spaced(num_classes: int, k: int) -> Tuple[int, ...]:
    """``k`` class ids spread evenly over ``range(num_classes)``."""
    if not 0 < k <= num_classes:
        raise ValueError(f'cannot pick {k} of {num_classes} classes')
    return tuple(
        int(v) for v in np.linspace(0, num_classes - 1, k).round().astype(int))


def check_sizes(num_train: int, num_val: int,
                img_size: Sequence[int]) -> Tuple[int, int]:
    """Validate the common generator arguments; return ``(H, W)``."""
    if num_train < 1 or num_val < 1:
        raise ValueError('num_train and num_val must be >= 1, got '
                         f'{num_train} and {num_val}')
    if len(img_size) != 2 or min(img_size) < 16:
        raise ValueError(f'img_size must be (h, w) >= 16, got {img_size}')
    return int(img_size[0]), int(img_size[1])


def add_voc_object(root: ET.Element, name: str, box: Sequence[int],
                   **fields: str) -> None:
    """Append a PASCAL-VOC ``<object>`` (``name``, extra ``fields`` such as
    ``difficult``, then ``<bndbox>``) to ``root``; ``box`` is half-open
    0-based ``x1, y1, x2, y2``, written 1-based inclusive as VOC does."""
    obj = ET.SubElement(root, 'object')
    ET.SubElement(obj, 'name').text = name
    for tag, text in fields.items():
        ET.SubElement(obj, tag).text = text
    bndbox = ET.SubElement(obj, 'bndbox')
    x1, y1, x2, y2 = (int(v) for v in box)
    for tag, v in (('xmin', x1 + 1), ('ymin', y1 + 1), ('xmax', x2), ('ymax',
                                                                      y2)):
        ET.SubElement(bndbox, tag).text = str(v)
