"""Image inputs of the inference and analysis tools."""
import os
import os.path as osp
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np

__all__ = [
    'IMG_EXTENSIONS', 'collect_images', 'named_images', 'read_image_rgb',
    'downscale', 'image_notes', 'unreadable_reason'
]

IMG_EXTENSIONS = ('.jpg', '.jpeg', '.png', '.bmp', '.ppm', '.tif', '.tiff',
                  '.webp')


def named_images(paths: Union[str, Sequence[str]],
                 skip_dir: Optional[str] = None) -> List[Tuple[str, str]]:
    """Image files given directly or found (recursively, sorted) in folders,
    each with its name relative to what was given.

    The name is the file name (extension included) for a file given
    directly, and the path below the folder (``sub/x.jpg``) for a file
    found in a folder, so two files of one input never share a name.

    Args:
        paths: Files and / or folders.
        skip_dir: A subfolder not to walk into (the output folder, where
            an earlier run's pictures are).

    Raises:
        FileNotFoundError: A path that does not exist, or no image at all.
    """
    if isinstance(paths, str):
        paths = [paths]
    skip = osp.realpath(skip_dir) if skip_dir is not None else None
    images = []
    for path in paths:
        if osp.isdir(path):
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(
                    d for d in dirs if osp.realpath(osp.join(root, d)) != skip)
                found = [
                    osp.join(root, f) for f in sorted(files)
                    if f.lower().endswith(IMG_EXTENSIONS)
                ]
                images += [(f, osp.relpath(f, path)) for f in found]
        elif osp.isfile(path):
            images.append((path, osp.basename(path)))
        else:
            raise FileNotFoundError(f'no such image or folder: {path}')
    if not images:
        raise FileNotFoundError(f'no images found in {list(paths)}')
    return images


def collect_images(paths: Union[str, Sequence[str]]) -> List[str]:
    """Image files given directly or found (recursively, sorted) in folders.

    Raises:
        FileNotFoundError: A path that does not exist, or no image at all.
    """
    return [path for path, _ in named_images(paths)]


def read_image_rgb(path: str) -> Optional[np.ndarray]:
    """The (H, W, 3) uint8 RGB image, or None if it cannot be decoded (or
    is not a regular file).

    Decoded as the hosts' ``LoadImageFromFile`` does by default (mmcv,
    OpenCV, ``color``): EXIF orientation applied, grayscale and CMYK
    converted to RGB, an alpha channel dropped, 16-bit samples reduced to
    8 bits.
    """
    import mmcv
    if not osp.isfile(path):  # a FIFO would block the read for ever
        return None
    try:
        img = mmcv.imread(path, channel_order='rgb')
    except Exception:  # unreadable or undecodable: reported by the caller
        return None
    if img is None or img.ndim != 3 or img.size == 0:
        return None
    return img


def downscale(img: np.ndarray, max_side: int) -> np.ndarray:
    """``img`` resized (area interpolation, aspect kept) so that its longer
    side is ``max_side``; unchanged if it is not longer."""
    import cv2
    h, w = img.shape[:2]
    if max(h, w) <= max_side:
        return img
    scale = max_side / max(h, w)
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    return cv2.resize(img, size, interpolation=cv2.INTER_AREA)


def image_notes(path: str) -> List[str]:
    """What decoding (:func:`read_image_rgb`, the hosts' ``color`` loading)
    changes about an image, read from its header only: an applied EXIF
    orientation, a dropped alpha channel, CMYK or grayscale converted to
    RGB, 16-bit samples reduced to 8 bits. Empty for plain 8-bit RGB and
    for files Pillow cannot identify."""
    from PIL import Image
    try:
        with Image.open(path) as im:
            mode, fmt, info = im.mode, im.format, dict(im.info)
            orientation = im.getexif().get(0x0112, 1)
    except Exception:  # not for Pillow: nothing to say
        return []
    notes = []
    if orientation not in (None, 1):
        notes.append(f'EXIF orientation {orientation} applied: predicted '
                     'and drawn as displayed, not as stored')
    if mode in ('RGBA', 'LA', 'PA', 'La', 'RGBa') or 'transparency' in info:
        notes.append('alpha channel ignored: transparent pixels are '
                     'predicted from their colour')
    if mode == 'CMYK':
        notes.append('CMYK converted to RGB')
    if mode in ('1', 'L', 'I', 'F') or mode.startswith('I;16'):
        notes.append('grayscale: one channel repeated to RGB')
    deep = mode.startswith('I;16') or mode in ('I', 'F')
    if fmt == 'PNG':
        with open(path, 'rb') as f:
            header = f.read(26)
        deep = deep or (len(header) == 26 and header[24] == 16)
    if deep:
        notes.append('16-bit samples reduced to 8 bits')
    return notes


def unreadable_reason(path: str) -> str:
    """Why :func:`read_image_rgb` returned None for ``path``."""
    if not osp.exists(path):
        if osp.islink(path):
            return (f'a symbolic link to {os.readlink(path)}, which does '
                    'not exist')
        return 'no such file (removed while running?)'
    if not osp.isfile(path):
        return 'not a regular file (a FIFO, socket or device): not read'
    size = osp.getsize(path)
    if size == 0:
        return 'empty file (0 bytes)'
    return (f'cannot be decoded as an image ({size} bytes: truncated, '
            'corrupt or not an image)')
