"""Open vocabulary at run time: typed class names -> CLIP text embeddings.

F-ViT (CLIPSelf, https://arxiv.org/abs/2310.01403) classifies regions by
cosine with CLIP text embeddings of the class names, so it can detect any
classes whose names it is given. The embeddings are built on the fly with
the CLIP text tower the detector was trained with and cached on disk
(:func:`mmlocat.text.vocabulary_embeddings`, the same build as
``tools/misc/dump_text_embeddings.py``); this module finds that text
tower and points an F-ViT config at the embeddings; the box
head's cosine classifier and the CLIP region-score fusion then both use
the new vocabulary. A zero-shot segmentation config
(:class:`mmlocat.ZeroShotSegmentor`) takes a vocabulary the same way: its
``text_embeddings`` are swapped for the typed names' (no background row:
only a constant ``bg_thresh`` background stays, see
:func:`apply_zero_shot_vocabulary`).

Which text tower: the one recorded in the head's embedding-file sidecar
(``text_model``), else in the detector checkpoint's or the backbone
checkpoint's ``meta['clip']``; ``text_model`` / ``text_weights`` override
or complete it.
"""
import os.path as osp
from typing import Dict, List, Optional, Sequence, Tuple, Union

from mmengine.config import Config
from mmengine.logging import print_log

from mmlocat.text import (BACKGROUND, read_text_model, resolve_class_names,
                          sidecar_path)
from mmlocat.utils.pretrained import is_pretrained_cfg
from mmlocat.utils.records import (CLIP_KEY, check_text_weights,
                                   read_checkpoint_meta)

__all__ = [
    'parse_vocabulary', 'recorded_text_model', 'resolve_text_model',
    'apply_vocabulary', 'apply_zero_shot_vocabulary', 'embeddings_file',
    'is_zero_shot_config'
]


def parse_vocabulary(spec: Union[str, Sequence[str]]) -> List[str]:
    """The class names of a run-time vocabulary (``--classes``).

    ``spec`` is read by :func:`mmlocat.text.resolve_class_names`, the one
    class-list grammar: a ``.txt`` / ``.json`` file, a named list
    (``'imagenet_open_clip'``: its 1000 names), a dataset type, names
    separated by commas (``"cat, remote control"``), or one class name
    (``"cat"``); named lists win over a class of the same name. A
    vocabulary adds two rules: no name twice (except in a named list, as
    shipped) and no ``'background'``.

    Raises:
        ValueError: No names, duplicates, the reserved ``'background'``,
            or :func:`~mmlocat.text.resolve_class_names`'s errors.
        FileNotFoundError: A ``.txt`` / ``.json`` path that does not exist.
    """
    names = resolve_class_names(spec, unique=True)
    if BACKGROUND in names:
        raise ValueError(f'{BACKGROUND!r} is reserved (F-ViT embeds it '
                         'itself, the zero-shot segmentor finds it by '
                         'bg_thresh); leave it out of the vocabulary')
    return names


def is_zero_shot_config(cfg: Config) -> bool:
    """Whether ``cfg``'s model is :class:`mmlocat.ZeroShotSegmentor`."""
    model = cfg.get('model') or {}
    return str(model.get('type', '')).split('.')[-1] == 'ZeroShotSegmentor'


def _head_cfg(cfg: Config) -> dict:
    head = cfg.model.get('roi_head', {}).get('bbox_head', {})
    if not isinstance(head, dict) or 'text_embeddings' not in head:
        raise ValueError(
            'a run-time vocabulary needs an F-ViT config (model.roi_head.'
            'bbox_head with text_embeddings, mmlocat.CosineSimBBoxHead) or '
            'a zero-shot segmentation config (mmlocat.ZeroShotSegmentor); '
            f'{cfg.filename} has neither')
    return head


def embeddings_file(cfg: Config) -> str:
    """The text-embedding file of an F-ViT or zero-shot segmentation
    config."""
    if is_zero_shot_config(cfg):
        return cfg.model['text_embeddings']
    return _head_cfg(cfg)['text_embeddings']


def recorded_text_model(
        cfg: Config,
        checkpoint: Optional[str] = None,
        checkpoint_meta: Optional[Dict] = None) -> Tuple[Dict, str]:
    """The text tower recorded for an F-ViT / zero-shot segmentation
    config and checkpoint (``checkpoint_meta``: its ``meta`` when the
    caller has read it, :class:`mmlocat.utils.pretrained.ModelCheckpoint`;
    by default it is read from the file).

    Looked up in order: the sidecar of the config's embedding file
    (``text_model``), the detector checkpoint's ``meta['clip']``, the
    backbone ``init_cfg`` checkpoint's ``meta['clip']``.

    Returns:
        ``(record, where)``: the first non-empty record (``{}`` if none)
        and a description of the places looked at, for error messages.
    """
    places = []
    emb_file = embeddings_file(cfg)
    places.append(sidecar_path(emb_file))
    if emb_file and osp.isfile(sidecar_path(emb_file)):
        record = read_text_model(emb_file)
        if record.get('name'):
            return record, sidecar_path(emb_file)
    backbone_init = cfg.model.get('backbone', {}).get('init_cfg')
    backbone_ckpt = (
        backbone_init.get('checkpoint')
        if is_pretrained_cfg(backbone_init) else None)
    for path in (checkpoint, backbone_ckpt):
        if path:
            places.append(path)
            meta = (
                checkpoint_meta
                if path == checkpoint and checkpoint_meta is not None else
                read_checkpoint_meta(path))
            record = meta.get(CLIP_KEY) or {}
            if record.get('name'):
                return dict(record), path
    return {}, ', '.join(places)


def _find_weights(recorded: Optional[str],
                  search_dirs: Sequence[str]) -> Optional[str]:
    if not recorded:
        return None
    candidates = [recorded] + [
        osp.join(d, osp.basename(recorded)) for d in search_dirs if d
    ]
    return next((c for c in candidates if osp.isfile(c)), None)


def resolve_text_model(
    record: Dict,
    where: str,
    text_model: Optional[str] = None,
    text_weights: Optional[str] = None,
    search_dirs: Sequence[str] = ()
) -> Tuple[str, str]:
    """``(open_clip model name, weights)`` of the text tower to use.

    The recorded ``name`` and ``weights`` are used unless given; a recorded
    weights file is looked for as written and in ``search_dirs``; a file
    whose text tower differs from the recorded ``text_sha256`` (records
    without one: whose sha256 differs from the recorded one) is refused.

    Raises:
        ValueError: Nothing recorded and nothing given (naming
            ``--text-model`` / ``--text-weights``), or other weights than
            the recorded ones.
    """
    name = text_model or record.get('name')
    if not name:
        raise ValueError(
            f'no CLIP text model is recorded in {where}: pass --text-model '
            '(the open_clip model name of the detector\'s CLIP, e.g. '
            'ViT-B-16) and --text-weights (its weights file)')
    weights = text_weights or _find_weights(record.get('weights'), search_dirs)
    if weights is None:
        recorded = record.get('weights')
        hint = (f'{where} records the weights {recorded!r} '
                f'(sha256 {record.get("sha256", "unknown")}), which is not '
                f'in {[w for w in [recorded] + list(search_dirs) if w]}'
                if recorded else f'{where} records no weights file')
        raise ValueError(f'the text tower {name} needs its weights: {hint}; '
                         'pass --text-weights FILE')
    if osp.isfile(weights) and name == record.get('name'):
        check_text_weights(record, where, name, weights)
    return name, weights


def apply_vocabulary(cfg: Config, embeddings_file: str,
                     names: Sequence[str]) -> Config:
    """Point an F-ViT config's box head at a run-time vocabulary.

    The head's classes become ``names`` (read from the file's sidecar);
    typed names that are base classes of the config keep the base fusion
    exponent ``alpha``, the others are novel (``beta``); a config without
    ``base_class_names`` treats every class as base, as it does for its own
    vocabulary. ``train_class_names`` (the training label space) is
    dropped: it is meaningless for another vocabulary.

    Returns:
        ``cfg`` itself, changed in place.
    """
    head = _head_cfg(cfg)
    base = head.get('base_class_names')
    if base is not None:
        try:
            known = set(resolve_class_names(base))
        except FileNotFoundError as err:
            print_log(
                f'vocabulary: {err}; every typed class is treated as novel',
                logger='current')
            known = set()
        base = [n for n in names if n in known]
    head['text_embeddings'] = embeddings_file
    head['class_names'] = None
    head['base_class_names'] = base
    cfg.model['train_class_names'] = None
    return cfg


def apply_zero_shot_vocabulary(cfg: Config, embeddings_file: str,
                               names: Sequence[str]) -> Config:
    """Point a zero-shot segmentation config at a run-time vocabulary.

    The segmentor's classes become ``names`` (read from the file's
    sidecar, one name each), and the build-time ``classes`` check and the
    config's class-name file are dropped (they name the dataset's
    classes). A text background (the class-name file's first line, SCLIP's
    ``prob_thd``) goes with them: ``prob_thd`` becomes 0, as label 0 is now
    the first typed name. ``bg_thresh`` (a constant background channel) is
    kept: with it label 0 is the background and the typed names follow;
    without it every pixel gets one of the typed names.

    Returns:
        ``cfg`` itself, changed in place.
    """
    if not is_zero_shot_config(cfg):
        raise ValueError(f'{cfg.filename} is not a zero-shot segmentation '
                         'config (mmlocat.ZeroShotSegmentor)')
    cfg.model['text_embeddings'] = embeddings_file
    cfg.model['classes'] = None
    cfg.model['class_name_file'] = None
    cfg.model['prob_thd'] = 0.
    return cfg
