"""Plant the data faults users meet into files of a generated dataset.

For the tests of the dataset checker (``tools/misc/check_dataset.py``),
:class:`mmlocat.CheckedDataset` and :class:`mmlocat.CheckSegMap`: each
function rewrites one file in place, as the fault would leave it.
"""
import os

import numpy as np
from PIL import Image

__all__ = [
    'FAULTS', 'plant', 'make_empty', 'truncate', 'scramble',
    'set_exif_orientation', 'halve_label', 'set_label_value'
]


def make_empty(path: str) -> None:
    """A zero-byte file (an interrupted copy)."""
    open(path, 'wb').close()


def truncate(path: str, keep: float = 0.5) -> None:
    """Keep the first ``keep`` of the file's bytes (a cut download)."""
    with open(path, 'rb') as f:
        data = f.read()
    with open(path, 'wb') as f:
        f.write(data[:max(1, int(len(data) * keep))])


def scramble(path: str) -> None:
    """Bytes that are no image (an HTML error page saved as ``.jpg``)."""
    with open(path, 'wb') as f:
        f.write(b'<html><body>404 Not Found</body></html>\n' * 8)


def set_exif_orientation(path: str, orientation: int = 6) -> None:
    """Re-save a JPEG with an EXIF orientation (6: turn 90 degrees
    clockwise to display, as phone cameras write)."""
    with Image.open(path) as img:
        pixels = img.copy()
    exif = Image.Exif()
    exif[0x0112] = orientation
    pixels.save(path, format='JPEG', quality=95, exif=exif.tobytes())


def halve_label(path: str) -> None:
    """Re-save a label PNG at half its resolution (nearest)."""
    with Image.open(path) as img:
        label = np.array(img)
    Image.fromarray(label[::2, ::2]).save(path, format='PNG')


def set_label_value(path: str, value: int) -> None:
    """Write ``value`` into the top-left 2x2 pixels of a label PNG."""
    with Image.open(path) as img:
        label = np.array(img)
    label[:2, :2] = value
    Image.fromarray(label).save(path, format='PNG')


#: name -> function(path) of each planted fault.
FAULTS = dict(
    empty=make_empty,
    truncated=truncate,
    undecodable=scramble,
    exif_rotated=set_exif_orientation,
    half_label=halve_label)


def plant(kind: str, path: str) -> str:
    """Plant fault ``kind`` (:data:`FAULTS`) into ``path``; returns it."""
    if kind not in FAULTS:
        raise ValueError(f'unknown fault {kind!r}; choose from '
                         f'{sorted(FAULTS)}')
    if not os.path.isfile(path):
        raise FileNotFoundError(path)
    FAULTS[kind](path)
    return path
