"""Shrink a shipped segmentation config to a seconds-long CPU run.

The end-to-end tests never edit a shipped config. :func:`write_tiny_config`
writes a *derived* config next to the test data::

    _base_ = '/abs/path/configs/locat/upernet_locat-b_ade20k.py'
    <the overrides below>

so everything not listed here (model types, heads, losses, optimizer,
schedulers, evaluator, dataset classes, pipeline steps and their options)
is exactly what the shipped config resolves to. The overrides:

* backbone ``arch`` -> ``dict(embed_dims=32, num_layers=L, num_heads=2,
  feedforward_channels=64)`` with ``L = 4`` for multi-level configs
  (``out_indices`` become ``(0, 1, 2, 3)``) and ``L = 2`` for single-level
  ones (probes keep ``out_indices=-1``); ``frozen_stages`` that froze every
  block freeze every tiny block; ``init_cfg=None`` (no weights needed).
  ``img_size`` is kept, so GAug's constants and the position-embedding
  resampling run as shipped.
* neck / decode / auxiliary heads: ``in_channels`` -> 32, ``out_channels``
  -> 32, ``channels`` -> 16.
* crops -> 64 x 64 (``data_preprocessor.size``, ``RandomCrop``); every
  ``scale`` of ``RandomResize`` / ``Resize`` and the slide-test
  ``crop_size`` / ``stride`` are scaled by ``64 / shipped crop``.
* data roots (the generated tiny data), batch size 2, ``num_workers=0``,
  no persistent workers.
* ``max_iters`` / ``val_interval`` / checkpoint interval = ``iters`` and a
  log line per iteration; the schedulers are left as shipped.
"""
import os.path as osp
import pprint
from typing import Optional, Sequence

from mmengine.config import Config

TINY_DIMS = 32
TINY_HEAD_CHANNELS = 16
TINY_CROP = 64


def _scaled(value, factor: float):
    """Scale an int or a sequence of ints by ``factor`` (at least 1)."""
    if isinstance(value, (list, tuple)):
        return tuple(max(1, round(v * factor)) for v in value)
    return max(1, round(value * factor))


def _tiny_pipeline(pipeline: Sequence[dict], factor: float) -> list:
    steps = []
    for step in pipeline:
        step = dict(step)
        if step['type'] in ('RandomResize', 'Resize') and 'scale' in step:
            step['scale'] = _scaled(step['scale'], factor)
        if step['type'] == 'RandomCrop':
            step['crop_size'] = (TINY_CROP, TINY_CROP)
        steps.append(step)
    return steps


def _tiny_head(head: dict) -> dict:
    out = {}
    if 'in_channels' in head:
        channels = head['in_channels']
        out['in_channels'] = ([TINY_DIMS] * len(channels) if isinstance(
            channels, (list, tuple)) else TINY_DIMS)
    if 'out_channels' in head:
        out['out_channels'] = TINY_DIMS
    if 'channels' in head:
        out['channels'] = TINY_HEAD_CHANNELS
    return out


def tiny_overrides(cfg: dict,
                   data_root: str,
                   iters: int = 2,
                   batch_size: int = 2) -> dict:
    """The override dict for a shipped config as a plain dict (module doc)."""
    model = cfg['model']
    backbone = model['backbone']
    indices = backbone.get('out_indices', -1)
    multi = isinstance(indices, (list, tuple)) and len(indices) > 1
    num_layers = 4 if multi else 2
    tiny_backbone = dict(
        arch=dict(
            _delete_=True,  # the shipped arch is an alias string
            embed_dims=TINY_DIMS,
            num_layers=num_layers,
            num_heads=2,
            feedforward_channels=2 * TINY_DIMS),
        init_cfg=None)
    if multi:
        tiny_backbone['out_indices'] = tuple(range(len(indices)))
    if backbone.get('frozen_stages', -1) >= 12:
        tiny_backbone['frozen_stages'] = num_layers
    crop = tuple(cfg['crop_size'])
    factor = TINY_CROP / crop[0]
    tiny_model = dict(
        data_preprocessor=dict(size=(TINY_CROP, TINY_CROP)),
        backbone=tiny_backbone)
    for key in ('neck', 'decode_head', 'auxiliary_head'):
        if model.get(key):
            tiny_model[key] = _tiny_head(model[key])
    test_cfg = model.get('test_cfg') or {}
    if test_cfg.get('mode') == 'slide':
        tiny_model['test_cfg'] = dict(
            crop_size=(TINY_CROP, TINY_CROP),
            stride=_scaled(test_cfg['stride'], factor))

    def loader(name: str, bs: int) -> dict:
        dataset = cfg[name]['dataset']
        return dict(
            batch_size=bs,
            num_workers=0,
            persistent_workers=False,
            dataset=dict(
                data_root=data_root,
                pipeline=_tiny_pipeline(dataset['pipeline'], factor)))

    return dict(
        crop_size=(TINY_CROP, TINY_CROP),
        model=tiny_model,
        train_dataloader=loader('train_dataloader', batch_size),
        val_dataloader=loader('val_dataloader', 1),
        test_dataloader=loader('test_dataloader', 1),
        train_cfg=dict(max_iters=iters, val_interval=iters),
        default_hooks=dict(
            logger=dict(interval=1),
            checkpoint=dict(interval=iters, max_keep_ckpts=2)),
        randomness=dict(seed=0))


def _merge(dst: dict, src: dict) -> None:
    """Merge ``src`` into ``dst`` in place, dicts recursively."""
    for key, value in src.items():
        if isinstance(value, dict) and isinstance(dst.get(key), dict):
            _merge(dst[key], value)
        else:
            dst[key] = value


def write_tiny_config(shipped: str,
                      path: str,
                      data_root: str,
                      iters: int = 2,
                      batch_size: int = 2,
                      extra: Optional[dict] = None) -> str:
    """Write the derived config of ``shipped`` to ``path``.

    Args:
        shipped: Path of the shipped config (made absolute).
        path: Where to write the derived config.
        data_root: Root of the generated tiny dataset.
        iters: Training iterations (also the val and checkpoint interval).
        batch_size: Training batch size per process.
        extra: More top-level overrides, merged last (e.g. a test mode).

    Returns:
        ``path``.
    """
    shipped = osp.abspath(shipped)
    overrides = tiny_overrides(
        Config.fromfile(shipped).to_dict(),
        data_root,
        iters=iters,
        batch_size=batch_size)
    _merge(overrides, extra or {})
    lines = [f'_base_ = {shipped!r}', '']
    for key, value in overrides.items():
        lines.append(f'{key} = {pprint.pformat(value, width=72)}')
    with open(path, 'w', encoding='utf-8') as f:
        f.write('\n'.join(lines) + '\n')
    return path
