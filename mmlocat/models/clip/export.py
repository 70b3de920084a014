"""The towers of a trained :class:`CLIPContrastive` for F-ViT / zero-shot.

The OV configs load ``init_cfg=dict(type='Pretrained', checkpoint=...,
prefix='backbone.')`` into a ``CLIPViT`` / ``EVA02CLIPViT``: the trained
``image_encoder.*`` keys become ``backbone.*``, and ``meta['clip']``
records the CLIP whose text tower matches them, in the converters' format
(``name``, ``weights``, ``sha256``, ``act``), so the consumers' provenance
checks (F-ViT, the zero-shot configs) accept exactly the text embeddings of
that tower:

* a locked text tower (``lock_text=True``): the text tower the run was
  trained against, as the run recorded it
  (:class:`mmlocat.CLIPProvenanceHook`): the original CLIP's open_clip name
  and weights sha256;
* a trained text tower: it is written as open_clip text keys (plus the
  trained ``logit_scale``) to its own file (:func:`export_text_tower`),
  which ``tools/misc/dump_text_embeddings.py`` reads; the record names that
  file and its sha256, so embeddings of the original CLIP are refused.

Both records carry ``source``: ``'lastclip:<sha256 of the training
checkpoint>'``. An export that cannot name the text tower raises instead of
writing an empty record.
"""
import copy
import os.path as osp
import tempfile
from collections import OrderedDict
from typing import Dict, Optional, Tuple

from mmengine.config import Config

from mmlocat.utils.records import (CLIP_RUN_KEY, CONVERTER_KEY, LASTCLIP_KEY,
                                   SOURCE_KEY, TEXT_TOWER_KEY, clip_meta,
                                   file_sha256, read_checkpoint_meta,
                                   text_sha256)

__all__ = [
    'export_image_tower', 'export_text_tower', 'text_is_trained',
    'load_training_checkpoint'
]

IMAGE_PREFIX = 'image_encoder.'
TEXT_PREFIX = 'text_encoder.model.'


def _training_config(meta: Dict, source: str) -> Config:
    text = meta.get('cfg')
    if not text:
        raise ValueError(f'{source} has no training config in meta["cfg"] '
                         '(not an mmengine checkpoint of a CLIPContrastive '
                         'run)')
    # parse only: the run's custom imports need not be importable here
    with tempfile.TemporaryDirectory() as tmp:
        path = osp.join(tmp, 'training_config.py')
        with open(path, 'w', encoding='utf-8') as f:
            f.write(text)
        cfg = Config.fromfile(path, import_custom_modules=False)
    if cfg.model.get('type') != 'mmlocat.CLIPContrastive':
        raise ValueError(f'{source} was trained with {cfg.model.get("type")}'
                         ', not mmlocat.CLIPContrastive')
    return cfg


def _run_records(meta: Dict, source: str) -> Dict:
    records = meta.get(CLIP_RUN_KEY)
    if not isinstance(records, dict) or 'text' not in records:
        raise ValueError(
            f'{source} records no CLIP provenance (meta[{CLIP_RUN_KEY!r}], '
            'written by mmlocat.CLIPProvenanceHook while training): the text '
            'tower it was trained against is unknown. Train with the '
            "configs/last/clip_* recipes (their custom_hooks hold it)")
    return records


def text_is_trained(checkpoint: Dict, source: str) -> bool:
    """Whether the run trained its text tower (``lock_text=False``)."""
    model = _training_config(checkpoint.get('meta') or {}, source).model
    lock = model.get('lock_text')
    if lock is None:
        lock = model.text_encoder.get('lock', False)
    return not lock


def _text_weights(state: Dict, source: str) -> 'OrderedDict':
    """The trained checkpoint's text tower under open_clip's names."""
    text = OrderedDict((k[len(TEXT_PREFIX):], v) for k, v in state.items()
                       if k.startswith(TEXT_PREFIX))
    if not text:
        raise ValueError(f'{source} holds no {TEXT_PREFIX}* weights')
    return text


def _source(checkpoint: Dict, source: str) -> str:
    sha = checkpoint.get('sha256')
    if not sha:
        raise ValueError(f'{source}: the sha256 of the training checkpoint '
                         'is needed (load it with load_training_checkpoint)')
    return f'lastclip:{sha}'


def export_text_tower(checkpoint: Dict,
                      source: str) -> Tuple['OrderedDict', Dict]:
    """``(state_dict, meta)`` of a trained text tower, as open_clip keys.

    The ``text_encoder.model.*`` weights under open_clip's own names (the
    text keys of an open_clip CLIP state dict) plus the trained
    ``logit_scale``; ``meta[TEXT_TOWER_KEY]`` names the open_clip model (or
    its config) and the training checkpoint.

    Raises:
        ValueError: The run's text tower was locked (the original CLIP's
            weights are its text tower), or the checkpoint holds no text
            weights.
    """
    cfg = _training_config(checkpoint.get('meta') or {}, source)
    if not text_is_trained(checkpoint, source):
        raise ValueError(f'{source}: the text tower was locked '
                         '(lock_text=True), so it is the original CLIP\'s; '
                         'use that CLIP\'s weights for text embeddings')
    state = checkpoint.get('state_dict') or {}
    text = _text_weights(state, source)
    if 'logit_scale' in state:
        text['logit_scale'] = state['logit_scale']
    encoder = cfg.model.text_encoder
    info = dict(
        model_name=encoder.get('model_name'),
        source=_source(checkpoint, source))
    model_cfg = encoder.get('model_cfg')
    if model_cfg is not None:
        # plain types: the file is read with torch's weights-only loader
        info['model_cfg'] = model_cfg.to_dict() if hasattr(
            model_cfg, 'to_dict') else copy.deepcopy(dict(model_cfg))
    return text, {TEXT_TOWER_KEY: info}


def _clip_act(encoder: Dict, records: Dict, source: str,
              act: Optional[str]) -> Optional[str]:
    """The CLIPViT MLP activation: config, init record, else ``act``."""
    if encoder.get('type') != 'mmlocat.CLIPViT':
        return None
    found = encoder.get('act') or records.get('image', {}).get('act') or act
    if found is None:
        raise ValueError(
            f'{source}: the CLIPViT activation is neither in the training '
            'config nor recorded by its init checkpoint; pass --act')
    if act is not None and act != found:
        raise ValueError(f'{source}: --act {act} but the tower was trained '
                         f'with act={found!r}')
    return found


def export_image_tower(
        checkpoint: Dict,
        source: str,
        act: Optional[str] = None,
        prefix: str = 'backbone.',
        text_file: Optional[str] = None) -> Tuple['OrderedDict', Dict]:
    """``(state_dict, meta)`` of the image tower of a trained checkpoint.

    Args:
        checkpoint: :func:`load_training_checkpoint`'s dict
            (``state_dict``, ``meta`` with ``cfg`` and the run's records,
            ``sha256``).
        source: Its path (messages).
        act: ``CLIPViT`` MLP activation when neither the training config nor
            the tower's initial checkpoint records it.
        prefix: Prefix of the output keys.
        text_file: Where :func:`export_text_tower`'s output was written;
            required when the run trained its text tower (its name and
            sha256 become the record), refused when it did not.

    Raises:
        ValueError: Not a CLIPContrastive checkpoint, no run records, a
            text tower that nothing identifies, a missing / superfluous
            ``text_file``, or an unknown ``CLIPViT`` activation.
    """
    meta = checkpoint.get('meta') or {}
    cfg = _training_config(meta, source)
    records = _run_records(meta, source)
    state = checkpoint.get('state_dict') or {}
    tower = OrderedDict((prefix + k[len(IMAGE_PREFIX):], v)
                        for k, v in state.items()
                        if k.startswith(IMAGE_PREFIX))
    if not tower:
        raise ValueError(f'{source} holds no {IMAGE_PREFIX}* weights')
    trained_text = text_is_trained(checkpoint, source)
    run_text = records['text']
    fingerprint = text_sha256(_text_weights(state, source))
    if not trained_text and run_text.get('text_sha256') not in (None,
                                                                fingerprint):
        raise ValueError(
            f'{source}: the text tower was locked, but its weights in the '
            f'checkpoint (text tower {fingerprint}) are not the ones the run '
            f'recorded at its start ({run_text["text_sha256"]} of '
            f'{run_text.get("weights")}): some text layers were trained '
            '(text_encoder unlocked_layers?); train with lock_text=False to '
            'export a tuned text tower')
    if trained_text:
        if text_file is None or not osp.isfile(text_file):
            raise ValueError(
                f'{source} trained its text tower (lock_text=False): write '
                'it with --text-out FILE, the text embeddings of F-ViT / '
                'zero-shot must come from it')
        record = dict(
            weights=osp.basename(text_file), sha256=file_sha256(text_file))
        if run_text.get('name'):
            record['name'] = run_text['name']
    else:
        if text_file is not None:
            raise ValueError(f'{source}: the text tower was locked; there is '
                             'no trained text tower to write (drop '
                             '--text-out)')
        record = {
            k: run_text[k]
            for k in ('name', 'weights', 'sha256') if k in run_text
        }
        if not record.get('sha256'):
            raise ValueError(
                f'{source}: the locked text tower had no weights file '
                f'(record {run_text}), so nothing identifies the text '
                'embeddings that match this tower; an empty record would '
                'let every consumer\'s check pass. Train from an open_clip / '
                'OpenAI checkpoint (text_encoder.weights)')
    if fingerprint is not None:
        record['text_sha256'] = fingerprint
    if run_text.get('text_act'):
        record['text_act'] = run_text['text_act']
    record['source'] = _source(checkpoint, source)
    encoder = cfg.model.image_encoder
    found_act = _clip_act(encoder, records, source, act)
    if found_act is not None:
        record['act'] = found_act
    out_meta = dict(
        clip_meta(record, tower), **{
            SOURCE_KEY: osp.basename(source),
            CONVERTER_KEY: 'lastclip2mmlocat'
        })
    out_meta[LASTCLIP_KEY] = dict(
        image_encoder=encoder.get('type'),
        pooling=encoder.get('pooling', 'lazy_strike'),
        lock_text=not trained_text,
        text_model=run_text.get('name'),
        image_init=copy.deepcopy(records.get('image', {})),
        sha256=checkpoint['sha256'])
    return tower, out_meta


def load_training_checkpoint(path: str) -> Dict:
    """``{'state_dict', 'meta', 'sha256'}`` of an mmengine training
    checkpoint.

    The weights go through the converters' shared reader (one clear error
    for a missing, empty, corrupt or non-finite file); the meta is read with
    torch's weights-only unpickler (mmengine's message-hub types allowed).
    """
    from mmlocat.utils.checkpoint_io import read_state_dict
    state_dict = read_state_dict(path)
    return dict(
        state_dict=state_dict,
        meta=read_checkpoint_meta(path),
        sha256=file_sha256(path))
