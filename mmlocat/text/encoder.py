"""The open_clip text encoder that writes text embeddings.

Every embedding file mmlocat writes (``tools/misc/dump_text_embeddings.py``,
the run-time vocabulary of :mod:`mmlocat.text.cache`) is encoded by
:class:`~mmlocat.models.clip.OpenCLIPTextTower`, open_clip's own text tower
(https://github.com/mlfoundations/open_clip) with its ``encode_text``, fed
by open_clip's tokenizer of the same model. Weights come from a local file
(any layout the tower reads) or an open_clip pretrained tag, whose file
open_clip downloads and the tower then reads like any other.
"""
import os.path as osp
from typing import Dict, List, Optional

from mmlocat.utils.hosts import require_open_clip
from mmlocat.utils.records import (TEXT_TOWER_KEY, clip_provenance,
                                   read_checkpoint_meta, text_provenance)
from .embeddings import Encoder

__all__ = [
    'TextEncoder', 'open_clip_encoder', 'encoder_record',
    'register_model_config'
]


def _text_tower(pretrained: Optional[str], model_name: str):
    """An :class:`~mmlocat.models.clip.OpenCLIPTextTower` of open_clip's
    ``model_name`` with the text tower of the file ``pretrained`` loaded
    (any layout :meth:`~mmlocat.models.clip.OpenCLIPTextTower.
    load_open_clip_weights` reads; None: open_clip's random init).

    Raises:
        ValueError: The file is a trained LaSt-CLIP text tower
            (``lastclip2mmlocat.py --text-out``) of another open_clip
            model, or does not fit the model.
    """
    # the model layer imports this package: imported where it is used
    from mmlocat.models.clip import OpenCLIPTextTower
    if pretrained is not None:
        info = read_checkpoint_meta(pretrained).get(TEXT_TOWER_KEY) or {}
        trained_as = info.get('model_name')
        if trained_as and trained_as != model_name:
            raise ValueError(
                f'{pretrained} is the text tower of open_clip model '
                f'{trained_as!r}, not {model_name!r}: pass --model '
                f'{trained_as}')
    tower = OpenCLIPTextTower(model_name=model_name, weights=pretrained)
    tower.init_weights()
    return tower


def _tag_file(open_clip, model_name: str, tag: str) -> str:
    """The local file of open_clip's pretrained ``tag`` of ``model_name``
    (downloaded by open_clip into its cache, as its ``create_model``
    does)."""
    cfg = open_clip.get_pretrained_cfg(model_name, tag)
    if not cfg:
        raise ValueError(
            f'{tag!r} is neither a weights file nor an open_clip pretrained '
            f'tag of {model_name} (its tags: '
            f'{open_clip.list_pretrained_tags_by_model(model_name)})')
    return open_clip.download_pretrained(cfg)


class TextEncoder:
    """``prompts -> (N, D)`` features of an open_clip text tower
    (:class:`~mmlocat.models.clip.OpenCLIPTextTower`, open_clip's
    ``encode_text``) and its tokenizer.

    Attributes:
        tower: The text tower.
        record: The tower's provenance, what an embedding sidecar records
            (``name``, ``weights``, the file's ``sha256``, ``text_sha256``
            of the weights it encodes with, ``text_act``).
    """

    def __init__(self, tower, tokenizer, device: str, record: Dict) -> None:
        self.tower = tower
        self.tokenizer = tokenizer
        self.device = device
        self.record = record

    def __call__(self, prompts: List[str]):
        import torch
        with torch.no_grad():
            return self.tower(self.tokenizer(prompts).to(self.device))


def open_clip_encoder(model_name: str,
                      pretrained: Optional[str],
                      device: str = 'cpu') -> TextEncoder:
    """open_clip's text tower of ``model_name`` with ``pretrained``'s
    weights, as a :class:`TextEncoder`.

    Args:
        model_name: open_clip model name (e.g. ``'ViT-B-16-quickgelu'``).
        pretrained: A weights file or an open_clip tag. A file's text
            tower alone is read, whatever its layout: OpenAI's TorchScript
            release (QuickGELU: a model with exact GELU is refused), an
            open_clip state dict, the EVA repo's EVA-CLIP ``.pt`` (with
            open_clip's ``EVA02-*``) or a trained LaSt-CLIP text tower
            (``lastclip2mmlocat.py --text-out``). A tag's file is
            downloaded by open_clip and read the same way. None: open_clip's
            random init.
        device: Where the tower runs.
    """
    open_clip = require_open_clip('text embeddings')
    is_file = bool(pretrained) and osp.isfile(pretrained)
    weights = pretrained
    if pretrained and not is_file:
        weights = _tag_file(open_clip, model_name, pretrained)
    tower = _text_tower(weights or None, model_name)
    if is_file:
        record = dict(
            clip_provenance(model_name, pretrained),
            text_sha256=tower.fingerprint())
        if tower.text_act is not None:
            record['text_act'] = tower.text_act
    else:  # a tag (or no weights): the record names it as given
        record = dict(
            name=model_name,
            weights=pretrained,
            **text_provenance(tower.model.state_dict(), tower.text_act))
    tower = tower.to(device).eval()
    return TextEncoder(tower, open_clip.get_tokenizer(model_name), device,
                       record)


def encoder_record(encode: Encoder, model_name: str, weights: str) -> Dict:
    """The text-tower record of ``encode``: a :class:`TextEncoder`'s own,
    else (another callable) the model name and weights file."""
    if isinstance(encode, TextEncoder):
        return dict(encode.record)
    record = clip_provenance(model_name, weights)
    record.setdefault('weights', weights)
    return record


def register_model_config(path: str) -> str:
    """Register an open_clip model-config JSON; returns its model name
    (the file stem)."""
    if not osp.isfile(path):
        raise FileNotFoundError(f'open_clip model config not found: {path}')
    require_open_clip('an open_clip model config').add_model_config(path)
    return osp.splitext(osp.basename(path))[0]
