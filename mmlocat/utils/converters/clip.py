"""OpenAI CLIP / open_clip image tower to ``mmlocat.CLIPViT`` keys.

OpenAI CLIP (https://arxiv.org/abs/2103.00020) and open_clip store the
image tower under ``visual.`` with the same names (``conv1``,
``class_embedding``, ``positional_embedding``, ``ln_pre``,
``transformer.resblocks.i.*``, ``ln_post``, ``proj``). The text tower is
dropped; a bare visual state dict is accepted too.

The state dict does not say which MLP activation the tower was trained with
(QuickGELU for OpenAI CLIP and open_clip's ``*-quickgelu`` models, exact
GELU for ``ViT-B-16``, ``ViT-L-14`` and most open_clip models), nor whether
it is an OpenAI-layout or a timm-based (EVA02) tower:
:func:`clip_tower_settings` reads both from the open_clip model name or
model config, never guessing.
"""
import json
import os.path as osp
from collections import OrderedDict
from typing import Dict, Optional

from torch import Tensor

from ..hosts import require_open_clip
from ._keymap import rename_keys, require_keys, visual_keys

__all__ = [
    'convert_clip', 'clip_tower_settings', 'open_clip_model_config',
    'check_tower_config', 'check_openai_archive_act'
]

_TOP = {
    'conv1': 'patch_embed.projection',
    'class_embedding': 'cls_token',
    'positional_embedding': 'pos_embed',
    'ln_pre': 'pre_norm',
    'ln_post': 'ln1',
    'proj': 'proj',
}
_BLOCK = {
    'ln_1': 'ln1',
    'attn.in_proj_weight': 'attn.qkv.weight',
    'attn.in_proj_bias': 'attn.qkv.bias',
    'attn.out_proj': 'attn.proj',
    'ln_2': 'ln2',
    'mlp.c_fc': 'ffn.layers.0.0',
    'mlp.c_proj': 'ffn.layers.1',
}


def convert_clip(state_dict: Dict[str, Tensor]) -> 'OrderedDict[str, Tensor]':
    """Map an OpenAI-layout CLIP image tower to ``CLIPViT`` keys.

    Args:
        state_dict: A whole CLIP model (``visual.*`` plus the text tower)
            or the image tower alone, optionally under ``module.``.

    Returns:
        Backbone keys of :class:`mmlocat.models.CLIPViT` (no prefix).

    Raises:
        ValueError: For other layouts (timm-based open_clip towers,
            HuggingFace ``vision_model``, ResNet CLIP) or unknown keys.
    """
    state_dict = visual_keys(state_dict)
    if any(k.startswith('trunk.') for k in state_dict):
        raise ValueError('timm-based open_clip image towers (visual.trunk.*) '
                         'are not the OpenAI layout; load them with a timm '
                         'converter instead')
    if any(k.startswith('vision_model.') for k in state_dict):
        raise ValueError('HuggingFace CLIPVisionModel keys (vision_model.*) '
                         'are not supported; convert the OpenAI or open_clip '
                         'checkpoint instead')
    require_keys(state_dict,
                 ['conv1.weight', 'class_embedding', 'positional_embedding'],
                 'OpenAI CLIP ViT image tower')
    out = rename_keys(
        state_dict,
        top=_TOP,
        block_pattern=r'^transformer\.resblocks\.(\d+)\.(.+)$',
        block=_BLOCK,
        block_target='layers.{i}.{name}',
        source='OpenAI CLIP ViT image tower')
    # CLIP keeps these without the batch / token axes of mmpretrain's ViT.
    out['cls_token'] = out['cls_token'].reshape(1, 1, -1)
    out['pos_embed'] = out['pos_embed'].unsqueeze(0)
    return out


def open_clip_model_config(model_name: Optional[str] = None,
                           model_config: Optional[str] = None) -> Dict:
    """An open_clip model config: from a JSON file or open_clip's registry.

    Args:
        model_name: An open_clip model name (``'ViT-B-16'``,
            ``'ViT-B-16-quickgelu'``, ``'EVA02-L-14-336'``, ...); needs
            ``open_clip_torch``.
        model_config: Path of an open_clip model-config JSON (the files
            under ``open_clip/model_configs``), for models open_clip does
            not know.

    Raises:
        ValueError: Neither or both given, or an unknown model name.
    """
    if (model_name is None) == (model_config is None):
        raise ValueError('give exactly one of an open_clip model name or a '
                         'model-config file')
    if model_config is not None:
        if not osp.isfile(model_config):
            raise FileNotFoundError(
                f'open_clip model config not found: {model_config}')
        with open(model_config, encoding='utf-8') as f:
            cfg = json.load(f)
        if not isinstance(cfg, dict) or 'vision_cfg' not in cfg:
            raise ValueError(f'{model_config} is not an open_clip model '
                             'config: no vision_cfg')
        return cfg
    open_clip = require_open_clip(
        'reading an open_clip model name (not a model-config file)')
    cfg = open_clip.get_model_config(model_name)
    if cfg is None:
        raise ValueError(
            f'open_clip does not know the model {model_name!r}; known: '
            f'{open_clip.list_models()[:20]}...')
    return cfg


def clip_tower_settings(cfg: Dict) -> Dict:
    """The image tower's layout and activation from an open_clip config.

    Returns:
        ``dict(layout='openai' | 'timm', act='quick_gelu' | 'gelu' | None,
        timm_model_name=..., text_act=...)``; ``act`` is None for timm
        towers (their activation is fixed by the architecture, e.g.
        EVA02's SwiGLU); ``text_act`` is the text tower's MLP activation
        (open_clip's ``quick_gelu`` flag builds both towers' MLPs), None
        for a HuggingFace text tower.
    """
    vision = cfg.get('vision_cfg', {})
    timm_name = vision.get('timm_model_name')
    flag = 'quick_gelu' if cfg.get('quick_gelu', False) else 'gelu'
    text_act = None if cfg.get('text_cfg', {}).get('hf_model_name') else flag
    if timm_name:
        return dict(
            layout='timm',
            act=None,
            timm_model_name=timm_name,
            text_act=text_act)
    return dict(
        layout='openai', act=flag, timm_model_name=None, text_act=text_act)


def check_openai_archive_act(path: str,
                             act: Optional[str],
                             model: Optional[str] = None) -> None:
    """Refuse an OpenAI TorchScript archive read as a non-QuickGELU CLIP.

    OpenAI releases CLIP as TorchScript archives (``ViT-B-16.pt``), all
    trained with QuickGELU; open_clip state dicts do not say their
    activation (open_clip's ``ViT-B-16``: exact GELU; ``*-quickgelu`` and
    MetaCLIP: QuickGELU), so only an archive makes a mismatch knowable.

    Args:
        path: The archive.
        act: The activation the reader would use (``None``: unknown).
        model: The open_clip model name, or a model-config file / a
            description of one (``'.json'`` at the end or a space inside),
            it comes from (``None``: the activation was given as
            ``--act``).

    Raises:
        ValueError: ``act`` is known and not ``'quick_gelu'``.
    """
    if act is None or act == 'quick_gelu':
        return
    if model is None:
        what, fix = f'--act {act}', '--act quick_gelu'
    elif model.endswith('.json') or ' ' in model:
        what, fix = model, 'a model config with "quick_gelu": true'
    else:
        what, fix = f'the open_clip model {model}', f'{model}-quickgelu'
    raise ValueError(
        f'{path} is a TorchScript archive, i.e. an OpenAI CLIP release, '
        f'and OpenAI CLIP uses QuickGELU, but {what} uses {act!r} (exact '
        f'GELU): the tower would run with the wrong activation; use {fix} '
        '(e.g. --model ViT-B-16-quickgelu for ViT-B-16.pt)')


def check_tower_config(converted: Dict[str, Tensor], cfg: Dict,
                       source: str) -> None:
    """Check converted ``CLIPViT`` keys against an open_clip config's
    ``vision_cfg`` (width, depth, patch size).

    Raises:
        ValueError: Naming ``source``, the config value and the value
            found in the weights.
    """
    vision = cfg.get('vision_cfg', {})
    patch = converted['patch_embed.projection.weight']
    blocks = {k.split('.')[1] for k in converted if k.startswith('layers.')}
    found = dict(
        width=patch.shape[0], layers=len(blocks), patch_size=patch.shape[-1])
    for key, value in found.items():
        expected = vision.get(key)
        if expected is not None and int(expected) != int(value):
            raise ValueError(f'{source}: the model config says vision {key} '
                             f'{expected}, the weights have {value}')
