"""torchvision ``vit_b_16`` (LaSt-ViT release) to mmpretrain keys.

The supervised LaSt-ViT weights of "Vision Transformers Need More Than
Registers" (https://arxiv.org/abs/2602.22394, ChengShiest/LAST-ViT) are
torchvision ``VisionTransformer`` state dicts, possibly under a ``model.``
prefix. They become an mmpretrain ``ImageClassifier`` with an
``mmlocat.LaStViT`` backbone and a ``VisionTransformerClsHead``.
"""
from collections import OrderedDict
from typing import Dict

from torch import Tensor

from ..checkpoint_io import strip_prefix
from ._keymap import rename_keys, require_keys

__all__ = ['convert_torchvision_vit']

_TOP = {
    'class_token': 'backbone.cls_token',
    'conv_proj': 'backbone.patch_embed.projection',
    'encoder.pos_embedding': 'backbone.pos_embed',
    'encoder.ln': 'backbone.ln1',
    'heads.head': 'head.layers.head',
    'heads.pre_logits': 'head.layers.pre_logits',
}
_BLOCK = {
    'ln_1': 'ln1',
    'self_attention.in_proj_weight': 'attn.qkv.weight',
    'self_attention.in_proj_bias': 'attn.qkv.bias',
    'self_attention.out_proj': 'attn.proj',
    'ln_2': 'ln2',
    # torchvision >= 0.13 names the MLP by index, older releases by name.
    'mlp.0': 'ffn.layers.0.0',
    'mlp.linear_1': 'ffn.layers.0.0',
    'mlp.3': 'ffn.layers.1',
    'mlp.linear_2': 'ffn.layers.1',
}


def convert_torchvision_vit(
        state_dict: Dict[str, Tensor]) -> 'OrderedDict[str, Tensor]':
    """Map a torchvision ViT state dict to ``ImageClassifier`` keys.

    Args:
        state_dict: torchvision ``VisionTransformer`` tensors, optionally
            under ``model.`` and/or ``module.`` prefixes.

    Returns:
        Keys ``backbone.*`` (LaStViT / VisionTransformer) and
        ``head.layers.*`` (VisionTransformerClsHead).

    Raises:
        ValueError: If the dict is not a torchvision ViT or holds keys the
            converter does not know (e.g. a convolutional stem).
    """
    state_dict = strip_prefix(state_dict, ['module.'])
    state_dict = strip_prefix(state_dict, ['model.'])
    require_keys(state_dict,
                 ['class_token', 'conv_proj.weight', 'encoder.pos_embedding'],
                 'torchvision VisionTransformer')
    return rename_keys(
        state_dict,
        top=_TOP,
        block_pattern=r'^encoder\.layers\.encoder_layer_(\d+)\.(.+)$',
        block=_BLOCK,
        block_target='backbone.layers.{i}.{name}',
        source='torchvision VisionTransformer')
