"""open_clip's own text tower, without its image tower.

The text encoder is open_clip's model (``open_clip.create_model`` with
``pretrained=None``, or ``open_clip.CLIP`` / ``CustomTextCLIP`` from a
model-config dict) with its ``visual`` part and logit scale removed, so
:meth:`OpenCLIPTextTower.forward` is open_clip's ``encode_text`` itself
(https://github.com/mlfoundations/open_clip). The tower also reads the
checkpoint's ``logit_scale``, what open_clip's fine-tuning starts from.
Its parameters are ``model.<open_clip key>``: open_clip's own text keys.
"""
import copy
import os.path as osp
from typing import Dict, Optional

import torch
from mmengine.model import BaseModule
from torch import Tensor

from mmlocat.utils.checkpoint_io import read_clip_state_dict
from mmlocat.utils.converters.clip import check_openai_archive_act
from mmlocat.utils.hosts import require_open_clip
from mmlocat.utils.init_info import SummarisedInitInfo
from mmlocat.utils.records import (clip_provenance, file_text_sha256,
                                   text_sha256)

__all__ = ['OpenCLIPTextTower', 'build_open_clip_model', 'open_clip_text_act']

# The image tower open_clip's CLIP classes always build; its text tower does
# not depend on it, and it is dropped at once: a 1-block stand-in keeps the
# build cheap (the real one may be a 300M-parameter timm model).
_STAND_IN_VISION = dict(
    image_size=16, layers=1, width=8, head_width=8, patch_size=16)


def build_open_clip_model(model_name: Optional[str] = None,
                          model_cfg: Optional[Dict] = None):
    """A random-init open_clip CLIP (its text tower the real one) from a
    model name or a config dict; its image tower is a stand-in.

    Args:
        model_name: An open_clip model name (``'ViT-B-16'``,
            ``'EVA02-L-14-336'``, ...): its config from open_clip's registry
            (``open_clip.get_model_config``); no weights are downloaded.
        model_cfg: An open_clip model config (``embed_dim``, ``text_cfg``,
            optional ``quick_gelu`` and ``custom_text``), for models
            open_clip does not ship.
    """
    if (model_name is None) == (model_cfg is None):
        raise ValueError('give exactly one of text model_name or model_cfg')
    open_clip = require_open_clip('the CLIP text tower')
    if model_name is not None:
        model_cfg = open_clip.get_model_config(model_name)
        if model_cfg is None:
            raise ValueError(f'open_clip does not know the model '
                             f'{model_name!r}')
    cfg = copy.deepcopy(dict(model_cfg))
    for key in ('embed_dim', 'text_cfg'):
        if key not in cfg:
            raise ValueError(f'open_clip model_cfg needs {key!r}; got keys '
                             f'{sorted(cfg)}')
    if 'multimodal_cfg' in cfg:
        raise ValueError('CoCa-style configs (multimodal_cfg) are not '
                         'supported')
    cfg['vision_cfg'] = dict(_STAND_IN_VISION)
    custom = cfg.pop('custom_text',
                     False) or 'hf_model_name' in cfg['text_cfg']
    cls = open_clip.CustomTextCLIP if custom else open_clip.CLIP
    return cls(**cfg)


def open_clip_text_act(model: torch.nn.Module) -> Optional[str]:
    """The MLP activation of an open_clip model's text tower:
    ``'quick_gelu'`` / ``'gelu'`` (``None`` for a HuggingFace text tower,
    whose activation is its own)."""
    open_clip = require_open_clip('the CLIP text tower')
    text = getattr(model, 'text', model)
    for module in getattr(text, 'transformer', text).modules():
        if isinstance(module, open_clip.transformer.QuickGELU):
            return 'quick_gelu'
        if type(module) is torch.nn.GELU:
            return 'gelu'
    return None


class OpenCLIPTextTower(SummarisedInitInfo, BaseModule):
    """open_clip's text tower (token embedding ... text projection).

    Args:
        model_name: open_clip model name (see :func:`build_open_clip_model`).
        model_cfg: open_clip model config dict instead of a name.
        weights: Local open_clip checkpoint (a full CLIP state dict, as
            open_clip / OpenAI release them, or the text keys only); its text
            keys are loaded strictly by :meth:`init_weights` (missing or
            unexpected text keys raise). ``None`` keeps open_clip's random
            init.
        lock: Freeze the text tower with open_clip's ``lock_text_tower``
            (``open_clip_train --lock-text``; LiT,
            https://arxiv.org/abs/2111.07991, locks the image tower
            instead).
        unlocked_layers: Last text blocks left trainable when ``lock``.
        init_cfg: mmengine init config (unused by default).

    Attributes:
        pretrained_logit_scale: The ``logit_scale`` (log of CLIP's
            temperature inverse) of the ``weights`` file once loaded, or
            ``None`` (no weights, or a file without one).
    """

    def __init__(self,
                 model_name: Optional[str] = None,
                 model_cfg: Optional[Dict] = None,
                 weights: Optional[str] = None,
                 lock: bool = False,
                 unlocked_layers: int = 0,
                 init_cfg: Optional[dict] = None) -> None:
        super().__init__(init_cfg=init_cfg)
        model = build_open_clip_model(model_name, model_cfg)
        # keep only the text parts: open_clip's encode_text never reads them
        del model.visual
        del model.logit_scale
        if isinstance(getattr(model, 'logit_bias', None), torch.nn.Parameter):
            del model.logit_bias
        self.model = model
        self.model_name = model_name
        self.embed_dim = int(self._embed_dim())
        self.weights = weights
        self.pretrained_logit_scale: Optional[float] = None
        self.lock = lock
        if lock:
            model.lock_text_tower(unlocked_layers=unlocked_layers)

    def _embed_dim(self) -> int:
        text = getattr(self.model, 'text', self.model)
        proj = getattr(text, 'text_projection', None)
        if isinstance(proj, torch.nn.Linear):
            return proj.out_features
        if isinstance(proj, torch.nn.Parameter):
            return proj.shape[1]
        if hasattr(text, 'proj') and isinstance(text.proj, torch.nn.Linear):
            return text.proj.out_features  # HF text towers
        return text.output_dim

    def init_weights(self) -> None:
        """Load ``weights`` (if given) after mmengine's initialisation."""
        super().init_weights()
        if self.weights is not None:
            self.load_open_clip_weights(self.weights)

    @property
    def text_act(self) -> Optional[str]:
        """The MLP activation open_clip built (``'quick_gelu'`` /
        ``'gelu'``; ``None`` for a HuggingFace text tower)."""
        return open_clip_text_act(self.model)

    def provenance(self) -> Dict:
        """``{'name', 'weights', 'sha256', 'text_sha256', 'text_act'}`` of
        this tower: its open_clip model name, its weights file (see
        :func:`mmlocat.utils.records.clip_provenance`), the fingerprint
        of the text tower that file holds
        (:func:`mmlocat.utils.records.text_sha256`) and the activation;
        the fields that are known."""
        record = clip_provenance(self.model_name, self.weights)
        if self.weights is not None and osp.isfile(self.weights):
            fingerprint = file_text_sha256(self.weights)
            if fingerprint is not None:
                record['text_sha256'] = fingerprint
        if self.text_act is not None:
            record['text_act'] = self.text_act
        return record

    def fingerprint(self) -> str:
        """:func:`~mmlocat.utils.records.text_sha256` of the weights the
        tower holds now."""
        return text_sha256(self.model.state_dict())

    @property
    def context_length(self) -> int:
        return getattr(self.model, 'context_length',
                       getattr(self.model, 'text', self.model).context_length)

    def text_state_dict(self, state_dict: Dict[str, Tensor],
                        source: str) -> Dict[str, Tensor]:
        """The text keys of an open_clip CLIP state dict, renamed to this
        tower's layout (``CLIP`` or ``CustomTextCLIP``)."""
        open_clip = require_open_clip('the CLIP text tower')
        own = self.model.state_dict()
        custom = any(k.startswith('text.') for k in own)
        if custom and not any(k.startswith('text.') for k in state_dict):
            state_dict = open_clip.model.convert_to_custom_text_state_dict(
                dict(state_dict))
        text = {
            k: v
            for k, v in state_dict.items()
            if not k.startswith('visual.') and k not in ('logit_scale',
                                                         'logit_bias')
        }
        missing = sorted(set(own) - set(text))
        unexpected = sorted(set(text) - set(own))
        if missing or unexpected:
            raise ValueError(
                f'{source} does not fit the open_clip text tower '
                f'{self.model_name or "(model_cfg)"}: missing text keys '
                f'{missing[:8]}, unexpected {unexpected[:8]}')
        bad = [
            f'{k}: {tuple(text[k].shape)} vs {tuple(v.shape)}'
            for k, v in own.items() if text[k].shape != v.shape
        ]
        if bad:
            raise ValueError(f'{source}: text weights of the wrong shape '
                             f'(file vs model): {bad[:8]}')
        return text

    def load_open_clip_weights(self, path: str) -> None:
        """Load the text keys of a local CLIP checkpoint strictly: OpenAI's
        TorchScript ``.pt`` (refused for a model that is not QuickGELU), an
        open_clip state dict or safetensors file (``CLIP`` or
        ``CustomTextCLIP`` layout), the EVA repo's EVA-CLIP ``.pt``
        (``text.*``: open_clip's ``EVA02-*`` text tower) or a text tower
        file of ``lastclip2mmlocat.py --text-out``."""
        if not osp.isfile(path):
            raise FileNotFoundError(f'text tower weights not found: {path}')
        state_dict, kind = read_clip_state_dict(path)
        if kind == 'torchscript':
            check_openai_archive_act(path, self.text_act, self.model_name
                                     or 'the text model_cfg')
        # OpenAI archives also hold these ints (open_clip drops them too)
        # and TorchScript keeps the causal mask, a non-persistent buffer
        state_dict = {
            k: v
            for k, v in state_dict.items()
            if k not in ('input_resolution', 'context_length',
                         'vocab_size') and not k.endswith('attn_mask')
        }
        self.model.load_state_dict(
            self.text_state_dict(state_dict, path), strict=True)
        scale = state_dict.get('logit_scale')
        self.pretrained_logit_scale = (
            float(scale.reshape(-1)[0]) if scale is not None else None)

    def forward(self, tokens: Tensor) -> Tensor:
        """``(N, context_length)`` token ids -> ``(N, embed_dim)`` text
        features (unnormalised), open_clip's ``encode_text``."""
        return self.model.encode_text(tokens)
