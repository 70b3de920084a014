"""Image inputs of the inference and analysis tools."""
import os
import os.path as osp
from typing import List, Optional, Sequence, Union

import numpy as np

__all__ = ['IMG_EXTENSIONS', 'collect_images', 'read_image_rgb']

IMG_EXTENSIONS = ('.jpg', '.jpeg', '.png', '.bmp', '.ppm', '.tif', '.tiff',
                  '.webp')


def collect_images(paths: Union[str, Sequence[str]]) -> List[str]:
    """Image files given directly or found (recursively, sorted) in folders.

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
                images += [
                    osp.join(root, f) for f in sorted(files)
                    if f.lower().endswith(IMG_EXTENSIONS)
                ]
        elif osp.isfile(path):
            images.append(path)
        else:
            raise FileNotFoundError(f'no such image or folder: {path}')
    if not images:
        raise FileNotFoundError(f'no images found in {list(paths)}')
    return images


def read_image_rgb(path: str) -> Optional[np.ndarray]:
    """The (H, W, 3) uint8 RGB image, or None if it cannot be decoded."""
    import mmcv
    try:
        img = mmcv.imread(path, channel_order='rgb')
    except Exception:  # unreadable or undecodable: reported by the caller
        return None
    if img is None or img.ndim != 3 or img.size == 0:
        return None
    return img
