"""The on-disk cache of text embeddings.

A vocabulary typed at inference time (``tools/infer.py --classes``,
:class:`mmlocat.apis.MMLocatInferencer`) and every
``tools/misc/dump_text_embeddings.py`` output are embedded once with
:func:`~mmlocat.text.embeddings.write_text_embeddings` and kept under
:func:`default_cache_dir` (``$MMLOCAT_CACHE/vocabulary``, default
``~/.cache/mmlocat/vocabulary``), keyed by everything the rows depend on.
Entries are never stale (the key holds the weights' sha256); removing the
folder is always safe and frees the space.
"""
import hashlib
import json
import os
import os.path as osp
import shutil
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np
from mmengine.logging import print_log

from mmlocat.utils.records import file_sha256, templates_sha256
from mmlocat.utils.safe_load import load_array
from .class_names import read_json
from .embeddings import Encoder, sidecar_path, write_text_embeddings
from .encoder import encoder_record, open_clip_encoder
from .templates import TEMPLATE_SETS

__all__ = [
    'default_cache_dir', 'vocabulary_embeddings', 'cached_text_embeddings'
]

_CLEAR_HINT = ('remove the cache folder (it is rebuilt on demand) or pass '
               '--no-cache')


def default_cache_dir() -> str:
    """``$MMLOCAT_CACHE/vocabulary`` (default ``~/.cache/mmlocat``)."""
    root = os.environ.get('MMLOCAT_CACHE', osp.join('~', '.cache', 'mmlocat'))
    return osp.join(osp.expanduser(root), 'vocabulary')


def _cache_key(names: Sequence[str],
               model_name: str,
               weights: Optional[str],
               templates: str,
               prompt_style: str,
               background: bool,
               class_name_lines: Optional[Sequence[Sequence[str]]] = None,
               repeated_names: bool = False,
               model_config: Optional[str] = None) -> str:
    """What the rows depend on: the names (and synonyms), the open_clip
    model (and its registered config file's content), the weights (a
    file's sha256, so a copy or a twin config's file hits the same entry;
    else the tag as given), templates (name and content: a set edited under
    its name misses), prompt style and background row."""
    weights_id = (
        file_sha256(weights) if weights and osp.isfile(weights) else weights)
    fields = dict(
        names=list(names),
        model=model_name,
        weights=weights_id,
        templates=templates,
        templates_sha256=templates_sha256(TEMPLATE_SETS[templates]),
        prompt_style=prompt_style,
        background=background)
    # added only when set: run-time vocabularies keep their keys
    if class_name_lines is not None:
        fields['lines'] = [list(line) for line in class_name_lines]
    if repeated_names:
        fields['repeated_names'] = True
    if model_config:
        fields['model_config'] = file_sha256(model_config)
    blob = json.dumps(fields, sort_keys=True)
    return hashlib.sha256(blob.encode('utf-8')).hexdigest()[:24]


def cached_text_embeddings(
        out: str,
        classes: Sequence[str],
        model_name: str,
        weights: Optional[str],
        make_encoder: Callable[[], Encoder],
        templates: str = 'fvit',
        prompt_style: str = 'fvit',
        background: bool = False,
        class_name_lines: Optional[Sequence[Sequence[str]]] = None,
        repeated_names: bool = False,
        model_config: Optional[str] = None,
        cache_dir: Optional[str] = None) -> Tuple[np.ndarray, List[str], bool]:
    """:func:`~mmlocat.text.embeddings.write_text_embeddings` to ``out``
    through the cache: ``tools/misc/dump_text_embeddings.py``'s build.

    Embeddings of the same names, model, weights (by content), templates,
    prompt style and background row are built once and kept under
    ``cache_dir`` (:func:`default_cache_dir`), so a LaSt config and its CLS
    twin, which share their locked text tower, never encode twice. A hit
    copies the cached file and sidecar to ``out`` without building the
    text tower (``make_encoder`` is not called).

    Args:
        out: The ``.npy`` to write (its sidecar next to it).
        classes, templates, prompt_style, background, class_name_lines,
            repeated_names: As :func:`write_text_embeddings`.
        model_name: open_clip model name.
        weights: open_clip weights file or tag.
        make_encoder: Builds the encoder, on a miss only.
        model_config: The open_clip model-config JSON registered for
            ``model_name``, if any (its content is part of the key).
        cache_dir: Default :func:`default_cache_dir`.

    Returns:
        ``(embeddings, row names, whether the cache had them)``.
    """
    sidecar_path(out)  # a .npy path, before anything is hashed
    cache_dir = cache_dir or default_cache_dir()
    key = _cache_key(classes, model_name, weights, templates, prompt_style,
                     background, class_name_lines, repeated_names,
                     model_config)
    cached = osp.join(cache_dir, f'{key}.npy')
    hit = osp.isfile(cached) and osp.isfile(sidecar_path(cached))
    if not hit:
        encode = make_encoder()
        write_text_embeddings(
            cached,
            list(classes),
            encode,
            encoder_record(encode, model_name, weights),
            templates=templates,
            prompt_style=prompt_style,
            background=background,
            class_name_lines=class_name_lines,
            repeated_names=repeated_names)
    content = read_json(sidecar_path(cached), _CLEAR_HINT)
    record = content.get('text_model') if isinstance(content, dict) else None
    if hit and record and weights and osp.isfile(weights):
        # same bytes under another name: the sidecar names this file
        record['weights'] = osp.basename(weights)
    os.makedirs(osp.dirname(osp.abspath(out)), exist_ok=True)
    tmp = f'{out[:-len(".npy")]}.{os.getpid()}.tmp.npy'
    shutil.copyfile(cached, tmp)
    with open(sidecar_path(tmp), 'w', encoding='utf-8') as f:
        json.dump(content, f, indent=0)
    os.replace(sidecar_path(tmp), sidecar_path(out))
    os.replace(tmp, out)
    if hit:
        print_log(
            f'text embeddings: reused {cached} (same names, model, weights, '
            'templates and prompt style; the text tower was not built)',
            logger='current')
    embeddings = load_array(out)
    rows = content.get('queries', content.get('classes')) if isinstance(
        content, dict) else content
    return embeddings, list(rows), hit


def vocabulary_embeddings(names: Sequence[str],
                          model_name: str,
                          weights: str,
                          templates: str = 'fvit',
                          prompt_style: str = 'fvit',
                          background: bool = True,
                          cache_dir: Optional[str] = None,
                          device: str = 'cpu',
                          encoder: Optional[Encoder] = None,
                          repeated_names: bool = False) -> str:
    """An embedding file for ``names``.

    Built like ``tools/misc/dump_text_embeddings.py`` (``--background``
    when ``background``) and cached under ``cache_dir`` keyed by names,
    model name, weights (their sha256), templates, prompt style and the
    background row; a cached file is reused.

    Args:
        names: Class names (:func:`mmlocat.apis.parse_vocabulary`).
        model_name: open_clip model name.
        weights: open_clip weights file or tag.
        templates: A key of ``TEMPLATE_SETS``.
        prompt_style: ``'fvit'`` or ``'plain'``.
        background: Append a ``'background'`` row (F-ViT; the zero-shot
            segmentor refuses one).
        cache_dir: Default :func:`default_cache_dir`.
        device: Where the text tower runs.
        encoder: Prompts -> features (default: open_clip's tower).
        repeated_names: ``names`` may name a class twice (a named list as
            shipped, open_clip's ImageNet names): as
            :func:`~mmlocat.text.embeddings.write_text_embeddings`.

    Returns:
        The ``.npy`` path (its ``.json`` sidecar lies next to it).
    """
    if templates not in TEMPLATE_SETS:
        raise ValueError(f'templates must be one of {sorted(TEMPLATE_SETS)}, '
                         f'got {templates!r}')
    cache_dir = cache_dir or default_cache_dir()
    key = _cache_key(
        names,
        model_name,
        weights,
        templates,
        prompt_style,
        background,
        repeated_names=repeated_names)
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
        background=background,
        repeated_names=repeated_names)
    print_log(
        f'vocabulary: {len(names)} classes embedded with {model_name} -> '
        f'{path}',
        logger='current')
    return path
