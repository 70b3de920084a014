"""Image tower of a trained :class:`CLIPContrastive` for F-ViT / zero-shot.

The OV configs load ``init_cfg=dict(type='Pretrained', checkpoint=...,
prefix='backbone.')`` into a ``CLIPViT`` / ``EVA02CLIPViT``: the trained
``image_encoder.*`` keys become ``backbone.*`` and ``meta['clip']`` records
the CLIP as the clip2mmlocat / eva02_clip2mmlocat converters do (MLP
activation, model name, source sha256), so F-ViT's text-embedding
provenance check keeps working.
"""
import copy
import os.path as osp
import tempfile
from collections import OrderedDict
from typing import Dict, Optional, Tuple

from mmengine.config import Config

from mmlocat.utils.provenance import file_sha256, read_checkpoint_meta

__all__ = ['export_image_tower', 'load_training_checkpoint']

IMAGE_PREFIX = 'image_encoder.'


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
        return Config.fromfile(path, import_custom_modules=False)


def _init_checkpoint(encoder_cfg: Dict) -> Optional[str]:
    init = encoder_cfg.get('init_cfg') or {}
    return init.get('checkpoint') if init.get('type') == 'Pretrained' \
        else None


def export_image_tower(
        checkpoint: Dict,
        source: str,
        act: Optional[str] = None,
        prefix: str = 'backbone.') -> Tuple['OrderedDict', Dict]:
    """``(state_dict, meta)`` of the image tower of a trained checkpoint.

    Args:
        checkpoint: The loaded mmengine checkpoint (``state_dict``,
            ``meta['cfg']``).
        source: Its path (messages, sha256).
        act: ``CLIPViT`` MLP activation when neither the training config nor
            the tower's initial checkpoint records it.
        prefix: Prefix of the output keys.

    Raises:
        ValueError: Not a CLIPContrastive checkpoint, or the activation of a
            ``CLIPViT`` is unknown.
    """
    meta = checkpoint.get('meta') or {}
    cfg = _training_config(meta, source)
    if cfg.model.get('type') != 'mmlocat.CLIPContrastive':
        raise ValueError(f'{source} was trained with {cfg.model.get("type")}'
                         ', not mmlocat.CLIPContrastive')
    state = checkpoint.get('state_dict') or {}
    tower = OrderedDict((prefix + k[len(IMAGE_PREFIX):], v)
                        for k, v in state.items()
                        if k.startswith(IMAGE_PREFIX))
    if not tower:
        raise ValueError(f'{source} holds no {IMAGE_PREFIX}* weights')
    encoder = cfg.model.image_encoder
    init_ckpt = _init_checkpoint(encoder)
    init_meta = read_checkpoint_meta(init_ckpt) if init_ckpt else {}
    record = copy.deepcopy(init_meta.get('clip', {}))
    if encoder.get('type') == 'mmlocat.CLIPViT':
        found = encoder.get('act') or record.get('act') or act
        if found is None:
            raise ValueError(
                f'{source}: the CLIPViT activation is neither in the '
                f'training config nor recorded by {init_ckpt}; pass --act')
        if act is not None and act != found:
            raise ValueError(f'{source}: --act {act} but the tower was '
                             f'trained with act={found!r}')
        record['act'] = found
    text = cfg.model.text_encoder
    lock = cfg.model.get('lock_text')
    if lock is None:
        lock = text.get('lock', False)
    if not lock:
        # A fine-tuned text tower: embeddings of the original CLIP no longer
        # match, so the record names this checkpoint (F-ViT then refuses
        # embeddings that name the original CLIP).
        record = dict(act=record['act']) if 'act' in record else dict()
        record['name'] = f'lastclip:{osp.basename(source)}'
    out_meta = dict(
        source=osp.basename(source),
        converter='lastclip2mmlocat',
        clip=record,
        lastclip=dict(
            image_encoder=encoder.get('type'),
            pooling=encoder.get('pooling', 'lazy_strike'),
            lock_text=bool(lock),
            text_model=text.get('model_name'),
            sha256=file_sha256(source) if osp.isfile(source) else None))
    return tower, out_meta


def load_training_checkpoint(path: str) -> Dict:
    """``{'state_dict', 'meta'}`` of an mmengine training checkpoint.

    The weights go through the converters' shared reader (one clear error
    for a missing, empty, corrupt or non-finite file); the meta is read with
    torch's weights-only unpickler (mmengine's message-hub types allowed).
    """
    from mmlocat.utils.checkpoint_io import read_state_dict
    from mmlocat.utils.safe_load import allow_mmengine_checkpoint_globals
    allow_mmengine_checkpoint_globals()
    state_dict = read_state_dict(path)
    return dict(state_dict=state_dict, meta=read_checkpoint_meta(path))
