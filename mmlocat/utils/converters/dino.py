"""facebookresearch DINO ViT to ``mmlocat.LaStViT`` backbone keys.

DINO (Caron et al., https://arxiv.org/abs/2104.14294) ViT-S / ViT-B use
timm-style names (``blocks.i.norm1``, ``attn.qkv``, ``mlp.fc1``, ``norm``),
LayerNorm eps 1e-6 and qkv bias, i.e. a :class:`LaStViT` with default
options (``arch='deit-small'`` or ``'base'``).
"""
from collections import OrderedDict
from typing import Dict

from torch import Tensor

from ..checkpoint_io import strip_prefix
from ._keymap import rename_keys, require_keys

__all__ = ['convert_dino']

_TOP = {
    'cls_token': 'cls_token',
    'pos_embed': 'pos_embed',
    'patch_embed.proj': 'patch_embed.projection',
    'norm': 'ln1',
}
_BLOCK = {
    'norm1': 'ln1',
    'attn.qkv': 'attn.qkv',
    'attn.proj': 'attn.proj',
    'norm2': 'ln2',
    'mlp.fc1': 'ffn.layers.0.0',
    'mlp.fc2': 'ffn.layers.1',
}


def convert_dino(state_dict: Dict[str, Tensor],
                 drop_head: bool = True) -> 'OrderedDict[str, Tensor]':
    """Map a DINO (timm layout) ViT state dict to LaStViT backbone keys.

    Args:
        state_dict: Backbone tensors, optionally under ``module.`` and/or
            ``backbone.`` (as in DINO's teacher / student weights).
        drop_head: Drop ``head.*`` (DINO's projection head or a linear
            classifier); with ``False`` such keys are an error.

    Returns:
        Backbone keys of :class:`mmlocat.models.LaStViT` (no prefix).

    Raises:
        ValueError: If the dict is not a DINO / timm ViT or holds unknown
            keys (e.g. DINOv2 register or mask tokens).
    """
    state_dict = strip_prefix(state_dict, ['module.'])
    state_dict = strip_prefix(state_dict, ['backbone.'])
    require_keys(state_dict,
                 ['cls_token', 'pos_embed', 'patch_embed.proj.weight'],
                 'DINO / timm ViT')
    return rename_keys(
        state_dict,
        top=_TOP,
        block_pattern=r'^blocks\.(\d+)\.(.+)$',
        block=_BLOCK,
        block_target='layers.{i}.{name}',
        source='DINO / timm ViT',
        skip=('head.', ) if drop_head else ())
