"""EVA02-CLIP image tower to ``mmlocat.EVA02CLIPViT`` keys.

EVA-CLIP (https://arxiv.org/abs/2303.15389) checkpoints of the EVA repo
(baaivision/EVA, ``EVA-CLIP``) keep the image tower under ``visual.``:
``patch_embed.proj``, ``cls_token``, ``pos_embed``, ``rope.freqs_{cos,sin}``
(derived buffers), ``blocks.i.{norm1, attn.{q,k,v}_proj, attn.q_bias,
attn.v_bias, attn.inner_attn_ln, attn.proj, norm2, mlp.{w1, w2, ffn_ln,
w3}}``, ``norm`` and ``head``; the RoPE tables are buffers of one
module that every attention layer also holds, so the state dict repeats
them as ``blocks.i.attn.rope.freqs_{cos,sin}``, and CLIPSelf's EVA code
(its F-ViT checkpoints) adds tables cached for other grids
(``freqs_{cos,sin}_N``, ``N`` patches) and their counter ``rope.flag``.
open_clip's timm-based towers
(``EVA02-B-16``, ``EVA02-L-14-336``) keep the same weights under
``visual.trunk.`` with timm names (``attn.q_proj.bias``, ``attn.norm``,
``mlp.{fc1_g, fc1_x, norm, fc2}``). Both, with or without the ``visual.``
prefix, map here; the text tower is dropped.
"""
import math
import re
from collections import OrderedDict
from typing import Dict, List

import torch
from torch import Tensor

from ._keymap import rename_keys, require_keys, visual_keys

__all__ = ['convert_eva02_clip', 'rope_buffer_keys']

_TOP = {
    'patch_embed.proj': 'patch_embed.projection',
    'cls_token': 'cls_token',
    'pos_embed': 'pos_embed',
    'norm': 'ln1',
    'head': 'head',
}
_BLOCK = {
    'norm1': 'ln1',
    'norm2': 'ln2',
    'attn.q_proj': 'attn.q_proj',
    'attn.k_proj': 'attn.k_proj',
    'attn.v_proj': 'attn.v_proj',
    'attn.proj': 'attn.proj',
    # EVA repo names
    'attn.q_bias': 'attn.q_proj.bias',
    'attn.v_bias': 'attn.v_proj.bias',
    'attn.inner_attn_ln': 'attn.sub_norm',
    'mlp.w1': 'ffn.w1',
    'mlp.w2': 'ffn.w2',
    'mlp.ffn_ln': 'ffn.norm',
    'mlp.w3': 'ffn.w3',
    # timm names (open_clip ``visual.trunk``)
    'attn.norm': 'attn.sub_norm',
    'mlp.fc1_g': 'ffn.w1',
    'mlp.fc1_x': 'ffn.w2',
    'mlp.norm': 'ffn.norm',
    'mlp.fc2': 'ffn.w3',
}
# Derived RoPE buffers, at the top or in a block's attention: the tables
# (cached grids with an ``_N`` suffix) and CLIPSelf's cache counter.
_ROPE_KEY = re.compile(
    r'^(?:blocks\.\d+\.attn\.)?rope\.(?:freqs_(?:cos|sin)(?:_\d+)?|flag)$')


def _visual_part(state_dict: Dict[str, Tensor]) -> Dict[str, Tensor]:
    """The image tower's keys, without ``visual.`` / ``trunk.``."""
    state_dict = visual_keys(state_dict)
    if any(k.startswith('trunk.') for k in state_dict):
        extra = [k for k in state_dict if not k.startswith('trunk.')]
        if extra:
            raise ValueError('open_clip timm tower with weights outside the '
                             f'trunk (a separate projection?): {extra[:5]}; '
                             'only towers whose projection is the timm head '
                             '(EVA02-B-16, EVA02-L-14-336) are supported')
        state_dict = OrderedDict(
            (k[len('trunk.'):], v) for k, v in state_dict.items())
    if any(
            k.startswith(('conv1.', 'transformer.resblocks.'))
            for k in state_dict):
        raise ValueError('this is an OpenAI-layout CLIP tower; use '
                         'convert_clip / clip2mmlocat.py instead')
    if any(k.startswith('blocks.') and '.attn.qkv.' in k for k in state_dict):
        raise ValueError('fused attn.qkv weights: not an EVA02-CLIP tower '
                         '(EVA02-CLIP uses separate q/k/v projections with '
                         'sub-LN)')
    return state_dict


def rope_buffer_keys(state_dict: Dict[str, Tensor]) -> List[str]:
    """The RoPE buffers (tables and cache counter) among an EVA image
    tower's keys, in their order."""
    return [k for k in state_dict if _ROPE_KEY.match(k)]


def _check_rope(state_dict: Dict[str, Tensor], pt_seq_len: float) -> None:
    """Compare stored RoPE tables with those the model will compute."""
    # Imported here: the converters stay importable without the models.
    from mmlocat.models.backbones.eva02_clip_layers import eva_rope_table
    for key in rope_buffer_keys(state_dict):
        if key.endswith('.flag'):
            continue  # CLIPSelf's count of cached tables, not a table
        kind, other = ('cos', 'sin') if '.freqs_cos' in key else ('sin', 'cos')
        pair = key.replace(f'.freqs_{kind}', f'.freqs_{other}')
        if pair not in state_dict:
            raise ValueError(f'RoPE table {key} has no {pair}')
        if kind == 'sin':
            continue  # checked with its cosine
        sin_key = pair
        cos_s = state_dict[key].float()
        head_dims = cos_s.shape[-1]
        cos_s = cos_s.reshape(-1, head_dims)
        sin_s = state_dict[sin_key].float().reshape(-1, head_dims)
        grid = math.isqrt(cos_s.shape[0])
        if grid * grid != cos_s.shape[0]:
            raise ValueError(f'{key} has {cos_s.shape[0]} rows, not a square '
                             'patch grid')
        cos, sin = eva_rope_table((grid, grid), head_dims, pt_seq_len)
        if not (torch.allclose(cos_s, cos, atol=1e-4)
                and torch.allclose(sin_s, sin, atol=1e-4)):
            # Row 1 = patch (0, 1); the last column rotates with the column
            # index at the lowest frequency, so its angle pt_seq_len / grid
            # * f_min is small (no 2 pi wrap) and reveals pt_seq_len.
            half = head_dims // 2
            f_min = 10000.**(-(half - 2) / half)
            angle = math.atan2(sin_s[1, -1], cos_s[1, -1])
            guess = grid * angle / f_min
            raise ValueError(
                f'{key} does not match a RoPE with pt_seq_len={pt_seq_len} on '
                f'a {grid}x{grid} grid (with theta 1e4 it looks like '
                f'pt_seq_len '
                f'~{guess:.3g}); set rope_pt_seq_len in the model and the '
                'converter accordingly')


def convert_eva02_clip(
        state_dict: Dict[str, Tensor],
        rope_pt_seq_len: float = 16) -> 'OrderedDict[str, Tensor]':
    """Map an EVA02-CLIP image tower to ``EVA02CLIPViT`` keys.

    The RoPE buffers are not weights: every stored table (top-level,
    per-block copies, cached grids) is checked against the table
    :class:`~mmlocat.models.EVA02CLIPViT` computes with ``rope_pt_seq_len``
    (so a tower trained with other RoPE settings fails loudly) and dropped
    with CLIPSelf's cache counter (:func:`rope_buffer_keys`).
    ``w1`` (gate) and ``w2`` are stacked into mmpretrain's ``ffn.w12``.

    Args:
        state_dict: A whole EVA-CLIP / open_clip model or the image tower
            alone (EVA or timm names), optionally under ``module.``.
        rope_pt_seq_len: RoPE pre-training grid side of the model that will
            load the result.

    Returns:
        Backbone keys of :class:`mmlocat.models.EVA02CLIPViT` (no prefix).

    Raises:
        ValueError: For other layouts or keys this converter does not know.
    """
    state_dict = _visual_part(state_dict)
    require_keys(state_dict,
                 ['patch_embed.proj.weight', 'cls_token', 'pos_embed'],
                 'EVA02-CLIP image tower')
    _check_rope(state_dict, rope_pt_seq_len)
    out = rename_keys(
        state_dict,
        top=_TOP,
        block_pattern=r'^blocks\.(\d+)\.(.+)$',
        block=_BLOCK,
        block_target='layers.{i}.{name}',
        source='EVA02-CLIP image tower',
        skip=rope_buffer_keys(state_dict))
    layers = sorted(
        {int(k.split('.')[1])
         for k in out if k.startswith('layers.')})
    for i in layers:
        for kind in ('weight', 'bias'):
            gate = out.pop(f'layers.{i}.ffn.w1.{kind}', None)
            value = out.pop(f'layers.{i}.ffn.w2.{kind}', None)
            if (gate is None) != (value is None):
                raise ValueError(f'block {i}: SwiGLU {kind} has only one of '
                                 'w1 / w2')
            if gate is not None:
                out[f'layers.{i}.ffn.w12.{kind}'] = torch.cat((gate, value))
    return out
