"""OpenAI CLIP / open_clip image tower to ``mmlocat.CLIPViT`` keys.

OpenAI CLIP (https://arxiv.org/abs/2103.00020) and open_clip store the
image tower under ``visual.`` with the same names (``conv1``,
``class_embedding``, ``positional_embedding``, ``ln_pre``,
``transformer.resblocks.i.*``, ``ln_post``, ``proj``). The text tower is
dropped; a bare visual state dict is accepted too.
"""
from collections import OrderedDict
from typing import Dict

from torch import Tensor

from ..checkpoint_io import strip_prefix
from ._keymap import rename_keys, require_keys

__all__ = ['convert_clip']

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
    state_dict = strip_prefix(state_dict, ['module.'])
    if any(k.startswith('visual.') for k in state_dict):
        state_dict = OrderedDict((k[len('visual.'):], v)
                                 for k, v in state_dict.items()
                                 if k.startswith('visual.'))
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
