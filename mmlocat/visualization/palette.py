"""The one class palette of mmlocat's pictures.

Rule: a host dataset's palette (its ``METAINFO['palette']``, or a
checkpoint's ``dataset_meta['palette']``) is used when it is for the
classes drawn; otherwise the colours are mmsegmentation's for a dataset
without a palette (``BaseSegDataset._update_palette``: numpy seeded with
42, ``randint(0, 255)`` per channel), so a picture of mmlocat's and one of
mmseg's tools colour the same classes alike.
"""
from typing import List, Optional, Sequence

import numpy as np

__all__ = ['class_palette']


def class_palette(
        num_classes: int,
        palette: Optional[Sequence[Sequence[int]]] = None) -> List[List[int]]:
    """``num_classes`` RGB colours, one per class.

    Args:
        num_classes: How many classes are drawn.
        palette: The host dataset's palette for these classes (its first
            ``num_classes`` rows are used), or None. A palette with fewer
            rows is not for these classes and is not used.

    Returns:
        ``num_classes`` ``[R, G, B]`` lists of ints in ``[0, 255]``.
    """
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) \
            or num_classes < 0:
        raise ValueError(
            f'num_classes must be an int >= 0, got {num_classes!r}')
    if palette is not None and len(palette) >= num_classes:
        return [[int(v) for v in color] for color in palette[:num_classes]]
    # a local generator: the global numpy state is left alone
    rng = np.random.RandomState(42)
    return rng.randint(0, 255, size=(num_classes, 3)).tolist()
