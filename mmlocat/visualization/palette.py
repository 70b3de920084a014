"""The one class palette of mmlocat's pictures.

Rule: a host dataset's palette (its ``METAINFO['palette']``, or a
checkpoint's ``dataset_meta['palette']``) is used when it is for the
classes drawn. Otherwise (typed class names, a dataset without a palette)
the colours are, by default, as far apart as possible (``'distinct'``:
greedy farthest points in CIELAB from a fixed 16-level RGB grid, so the
first ``k`` colours never change when classes are added). mmsegmentation
colours such classes at random (``BaseSegDataset._update_palette``: numpy
seeded with 42, ``randint(0, 255)`` per channel); its closest two of 10
colours are 9.8 apart in CIELAB (about the step between two shades a
reader can just tell apart in a small swatch), of 50 colours 2.1, against
53.7 and 26.6 for ``'distinct'``. ``fallback='mmseg'`` gives mmseg's
colours, so a picture of mmlocat's and one of mmseg's tools colour such
classes alike.
"""
from functools import lru_cache
from typing import List, Optional, Sequence, Tuple

import cv2
import numpy as np

__all__ = ['class_palette', 'PALETTE_FALLBACKS']

PALETTE_FALLBACKS = ('distinct', 'mmseg')
_GRID_STEP = 17  # 0, 17, ..., 255: 16 levels per channel


def _lab(rgb: np.ndarray) -> np.ndarray:
    """CIELAB (L in [0, 100]) of ``(N, 3)`` RGB values in ``[0, 255]``."""
    rgb = np.asarray(rgb, np.float32).reshape(-1, 1, 3) / 255.0
    return cv2.cvtColor(rgb, cv2.COLOR_RGB2LAB).reshape(-1, 3)


@lru_cache(maxsize=4)
def _distinct(num_colors: int) -> Tuple[Tuple[int, int, int], ...]:
    levels = np.arange(0, 256, _GRID_STEP)
    grid = np.stack(np.meshgrid(levels, levels, levels, indexing='ij'),
                    -1).reshape(-1, 3)
    lab = _lab(grid)
    # far from white and black too: the picture's text and outlines
    distance = np.linalg.norm(
        lab[:, None] - _lab(np.array([[255] * 3, [0] * 3]))[None],
        axis=2).min(1)
    out = []
    for _ in range(num_colors):
        pick = int(np.argmax(distance))
        out.append(tuple(int(v) for v in grid[pick]))
        distance = np.minimum(distance,
                              np.linalg.norm(lab - lab[pick], axis=1))
    return tuple(out)


def class_palette(num_classes: int,
                  palette: Optional[Sequence[Sequence[int]]] = None,
                  fallback: str = 'distinct') -> List[List[int]]:
    """``num_classes`` RGB colours, one per class.

    Args:
        num_classes: How many classes are drawn.
        palette: The host dataset's palette for these classes (its first
            ``num_classes`` rows are used), or None. A palette with fewer
            rows is not for these classes and is not used.
        fallback: The colours without a palette: ``'distinct'`` (as far
            apart as possible) or ``'mmseg'`` (mmseg's random colours for a
            dataset without a palette).

    Returns:
        ``num_classes`` ``[R, G, B]`` lists of ints in ``[0, 255]``.
    """
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) \
            or num_classes < 0:
        raise ValueError(
            f'num_classes must be an int >= 0, got {num_classes!r}')
    if fallback not in PALETTE_FALLBACKS:
        raise ValueError(f'fallback must be one of {PALETTE_FALLBACKS}, got '
                         f'{fallback!r}')
    if palette is not None and len(palette) >= num_classes:
        return [[int(v) for v in color] for color in palette[:num_classes]]
    if fallback == 'distinct':
        return [list(color) for color in _distinct(num_classes)]
    # a local generator: the global numpy state is left alone
    rng = np.random.RandomState(42)
    return rng.randint(0, 255, size=(num_classes, 3)).tolist()
