"""Image inputs of the inference and analysis tools."""
import os
import os.path as osp
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np

__all__ = [
    'IMG_EXTENSIONS', 'collect_images', 'named_images', 'read_image_rgb',
    'downscale'
]

IMG_EXTENSIONS = ('.jpg', '.jpeg', '.png', '.bmp', '.ppm', '.tif', '.tiff',
                  '.webp')


def named_images(paths: Union[str, Sequence[str]]) -> List[Tuple[str, str]]:
    """Image files given directly or found (recursively, sorted) in folders,
    each with its name relative to what was given.

    The name is the file name (extension included) for a file given
    directly, and the path below the folder (``sub/x.jpg``) for a file
    found in a folder, so two files of one input never share a name.

    Raises:
        FileNotFoundError: A path that does not exist, or no image at all.
    """
    if isinstance(paths, str):
        paths = [paths]
    images = []
    for path in paths:
        if osp.isdir(path):
            for root, dirs, files in os.walk(path):
                dirs.sort()
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
    """The (H, W, 3) uint8 RGB image, or None if it cannot be decoded.

    Decoded as the hosts' ``LoadImageFromFile`` does by default (mmcv,
    OpenCV, ``color``): EXIF orientation applied, grayscale and CMYK
    converted to RGB, an alpha channel dropped, 16-bit samples reduced to
    8 bits.
    """
    import mmcv
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
