"""The on-disk cache of run-time vocabulary embeddings.

A vocabulary typed at inference time (``tools/infer.py --classes``,
:class:`mmlocat.apis.MMLocatInferencer`) is embedded once with
:func:`~mmlocat.text.embeddings.write_text_embeddings` and kept under
:func:`default_cache_dir`, keyed by everything the rows depend on.
"""
import hashlib
import json
import os
import os.path as osp
from typing import Optional, Sequence

from mmengine.logging import print_log

from mmlocat.utils.records import file_sha256
from .embeddings import Encoder, sidecar_path, write_text_embeddings
from .encoder import encoder_record, open_clip_encoder
from .templates import TEMPLATE_SETS

__all__ = ['default_cache_dir', 'vocabulary_embeddings']


def default_cache_dir() -> str:
    """``$MMLOCAT_CACHE/vocabulary`` (default ``~/.cache/mmlocat``)."""
    root = os.environ.get('MMLOCAT_CACHE', osp.join('~', '.cache', 'mmlocat'))
    return osp.join(osp.expanduser(root), 'vocabulary')


def _cache_key(names: Sequence[str], model_name: str, weights: str,
               templates: str, prompt_style: str, background: bool) -> str:
    weights_id = file_sha256(weights) if osp.isfile(weights) else weights
    blob = json.dumps(
        dict(
            names=list(names),
            model=model_name,
            weights=weights_id,
            templates=templates,
            prompt_style=prompt_style,
            background=background),
        sort_keys=True)
    return hashlib.sha256(blob.encode('utf-8')).hexdigest()[:24]


def vocabulary_embeddings(names: Sequence[str],
                          model_name: str,
                          weights: str,
                          templates: str = 'fvit',
                          prompt_style: str = 'fvit',
                          background: bool = True,
                          cache_dir: Optional[str] = None,
                          device: str = 'cpu',
                          encoder: Optional[Encoder] = None) -> str:
    """An embedding file for ``names``.

    Built like ``tools/misc/dump_text_embeddings.py`` (``--background``
    when ``background``) and cached under ``cache_dir`` keyed by names,
    model name, weights (their sha256), templates, prompt style and the
    background row; a cached file is reused.

    Args:
        names: Class names (see :func:`mmlocat.apis.parse_vocabulary`).
        model_name: open_clip model name.
        weights: open_clip weights file or tag.
        templates: A key of ``TEMPLATE_SETS``.
        prompt_style: ``'fvit'`` or ``'plain'``.
        background: Append a ``'background'`` row (F-ViT; the zero-shot
            segmentor refuses one).
        cache_dir: Default :func:`default_cache_dir`.
        device: Where the text tower runs.
        encoder: Prompts -> features (default: open_clip's tower).

    Returns:
        The ``.npy`` path (its ``.json`` sidecar lies next to it).
    """
    if templates not in TEMPLATE_SETS:
        raise ValueError(f'templates must be one of {sorted(TEMPLATE_SETS)}, '
                         f'got {templates!r}')
    cache_dir = cache_dir or default_cache_dir()
    key = _cache_key(names, model_name, weights, templates, prompt_style,
                     background)
    path = osp.join(cache_dir, f'{key}.npy')
    if osp.isfile(path) and osp.isfile(sidecar_path(path)):
        print_log(f'vocabulary: cached embeddings {path}', logger='current')
        return path
    encode = encoder or open_clip_encoder(model_name, weights, device)
    write_text_embeddings(
        path,
        list(names),
        encode,
        encoder_record(encode, model_name, weights),
        templates=templates,
        prompt_style=prompt_style,
        background=background)
    print_log(
        f'vocabulary: {len(names)} classes embedded with {model_name} -> '
        f'{path}',
        logger='current')
    return path
