"""Point a config at another data folder: ``--data-root DIR``.

Every shipped config reads its data under ``data/`` (the hosts' layout:
``data/ade/ADEChallengeData2016``, ``data/coco``, ``data/VOCdevkit/VOC2012``,
...), in several places: each dataset's ``data_root`` (nested ones inside
``ConcatDataset``, ``RepeatDataset``, ``CheckedDataset`` too), the COCO /
LVIS evaluators' ``ann_file`` (a full path, read when the metric is built),
embedding files under ``data/``. :func:`retarget_data_root` moves all of
them at once: a path under ``data/`` becomes the same path under ``DIR``,
so ``DIR`` holds what ``data/`` would (``tools/dataset_converters/
make_tiny_datasets.py --root DIR`` writes that layout).
"""
import os.path as osp
from typing import Any, List, Tuple

from mmengine.config import Config

__all__ = ['DEFAULT_DATA_ROOT', 'retarget_data_root']

#: The folder every shipped config reads its data from.
DEFAULT_DATA_ROOT = 'data'


def _under(value: str, old: str) -> str:
    """The part of ``value`` below ``old`` ('' for ``old`` itself), or
    None when ``value`` is not under it."""
    for prefix in (old, './' + old):
        if value.rstrip('/') == prefix:
            return ''
        if value.startswith(prefix + '/'):
            return value[len(prefix) + 1:]
    return None


def _walk(value: Any, key: str, old: str, new: str,
          changed: List[Tuple[str, str, str]]) -> Any:
    if isinstance(value, str):
        rest = _under(value, old)
        if rest is None:
            return value
        moved = osp.join(new, rest) if rest else new
        if value.endswith('/') and not moved.endswith('/'):
            moved += '/'  # mmseg joins some prefixes by string concatenation
        changed.append((key, value, moved))
        return moved
    if isinstance(value, dict):
        for k in list(value.keys()):
            value[k] = _walk(value[k], f'{key}.{k}' if key else str(k), old,
                             new, changed)
        return value
    if isinstance(value, (list, tuple)):
        items = [
            _walk(v, f'{key}.{i}', old, new, changed)
            for i, v in enumerate(value)
        ]
        return type(value)(items) if isinstance(value, tuple) else items
    return value


def retarget_data_root(cfg: Config,
                       root: str,
                       old: str = DEFAULT_DATA_ROOT) -> List[str]:
    """Move every path of ``cfg`` under ``old`` to the same path under
    ``root`` (in place).

    Every string value of the config, at any depth (datasets, nested
    datasets, evaluators, embedding files the model reads), that is
    ``old`` or starts with ``old/`` (or ``./old/``) is rewritten; paths
    relative to a dataset's ``data_root`` (``ann_file``, ``data_prefix``)
    follow it unchanged.

    Args:
        cfg: The loaded config.
        root: The new data folder (its layout that of ``old``).
        old: The folder the config names (``data``).

    Returns:
        One line per rewritten value (``key: old -> new``), for the tool
        to print.

    Raises:
        FileNotFoundError: ``root`` is not a folder.
        ValueError: No path of the config is under ``old``.
    """
    if not osp.isdir(root):
        raise FileNotFoundError(
            f'--data-root {root}: no such folder (it holds what {old}/ '
            'would: e.g. tools/dataset_converters/make_tiny_datasets.py '
            f'--root {root} writes it)')
    changed: List[Tuple[str, str, str]] = []
    old = old.rstrip('/')
    for key in list(cfg.keys()):
        cfg[key] = _walk(cfg[key], key, old, root.rstrip('/') or '/', changed)
    if not changed:
        raise ValueError(
            f'--data-root {root}: {cfg.filename} names no path under '
            f'{old}/ (set its paths with --cfg-options)')
    return [f'{key}: {was} -> {now}' for key, was, now in changed]
