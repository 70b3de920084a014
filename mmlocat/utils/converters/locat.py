"""Convert LocAtViT / ViT / DeiT checkpoints to mmlocat's LocAtViT layout.

The target is an mmpretrain ``ImageClassifier`` with a
:class:`~mmlocat.models.backbones.LocAtViT` backbone (``backbone.*``) and a
``VisionTransformerClsHead`` (``head.layers.head.*``). Sources:

* timm format: the public LocAtViT checkpoints (sinahmr/LocAtViT, with
  ``blocks.i.attn.gaug.*``) and plain timm ViT / DeiT checkpoints;
* mmpretrain format: an ``ImageClassifier`` (``backbone.*``) or a bare
  ``VisionTransformer`` state dict (``layers.*``), already in our names.

A plain ViT has no GAug weights: the backbone's strict ``Pretrained``
loading (``init_cfg=dict(type='Pretrained', checkpoint=..., prefix=
'backbone.')``, :func:`mmlocat.utils.pretrained.load_pretrained`) reports
them as newly initialised, and nothing else may be missing.
"""
import re
from collections import OrderedDict
from typing import Dict

import torch

from ..checkpoint_io import refuse_nonfinite_weights, strip_prefix

__all__ = [
    'GAUG_KEY', 'detect_vit_format', 'convert_timm_locat',
    'convert_vit_to_locat'
]

GAUG_KEY = 'attn.gaug.'

# timm block parameter -> mmpretrain encoder-layer parameter.
_BLOCK_RENAMES = (
    ('norm1.', 'ln1.'),
    ('attn.qkv.', 'attn.qkv.'),
    ('attn.proj.', 'attn.proj.'),
    ('attn.gaug.log_var.', 'attn.gaug.log_var.'),
    ('attn.gaug.log_alpha.', 'attn.gaug.log_alpha.'),
    ('norm2.', 'ln2.'),
    ('mlp.fc1.', 'ffn.layers.0.0.'),
    ('mlp.fc2.', 'ffn.layers.1.'),
)
# timm top-level parameter -> ImageClassifier parameter.
_TOP_RENAMES = (
    ('patch_embed.proj.', 'backbone.patch_embed.projection.'),
    ('norm.', 'backbone.ln1.'),
    ('fc_norm.', 'backbone.ln2.'),
    ('head.', 'head.layers.head.'),
)
_TOP_TENSORS = ('cls_token', 'reg_token', 'pos_embed')
_BLOCK_RE = re.compile(r'^blocks\.(\d+)\.(.+)$')
_WRAPPER_PREFIXES = ('module.', '_orig_mod.')
# Parameters of timm variants LocAtViT does not have: say why they fail.
_UNSUPPORTED_HINTS = {
    'dist_token': 'distilled DeiT (dist_token/head_dist)',
    'head_dist': 'distilled DeiT (dist_token/head_dist)',
    'ls1.': 'layer scale',
    'ls2.': 'layer scale',
    'norm_pre.': 'pre-norm (CLIP-style) ViT',
    'attn_pool.': 'attention pooling head',
    'q_norm.': 'qk-norm',
    'k_norm.': 'qk-norm',
}


def detect_vit_format(state_dict: Dict[str, torch.Tensor]) -> str:
    """Say which layout a ViT-family state dict is in.

    Args:
        state_dict: Tensors, possibly prefixed by ``module.``.

    Returns:
        ``'timm'``, ``'mmpretrain'`` (``backbone.*`` keys) or
        ``'mmpretrain_backbone'`` (a bare backbone, ``layers.*`` keys).

    Raises:
        ValueError: If the keys match none of them.
    """
    keys = set(strip_prefix(state_dict, _WRAPPER_PREFIXES))
    if 'patch_embed.proj.weight' in keys and any(
            k.startswith('blocks.0.') for k in keys):
        return 'timm'
    if 'backbone.patch_embed.projection.weight' in keys and any(
            k.startswith('backbone.layers.0.') for k in keys):
        return 'mmpretrain'
    if 'patch_embed.projection.weight' in keys and any(
            k.startswith('layers.0.') for k in keys):
        return 'mmpretrain_backbone'
    sample = sorted(keys)[:8]
    raise ValueError(
        'unknown checkpoint format: expected a timm ViT/LocAtViT '
        "('patch_embed.proj.weight', 'blocks.0.*') or an mmpretrain ViT "
        "('[backbone.]patch_embed.projection.weight', '[backbone.]layers.*')"
        f' state dict; first keys are {sample}')


def _rename_timm_key(key: str) -> str:
    if key in _TOP_TENSORS:
        return 'backbone.' + key
    match = _BLOCK_RE.match(key)
    if match:
        index, rest = match.groups()
        for old, new in _BLOCK_RENAMES:
            if rest.startswith(old):
                return f'backbone.layers.{index}.{new}{rest[len(old):]}'
        return ''
    for old, new in _TOP_RENAMES:
        if key.startswith(old):
            return new + key[len(old):]
    return ''


def convert_timm_locat(state_dict: Dict[str, torch.Tensor]) -> 'OrderedDict':
    """Rename a timm LocAtViT (or plain timm ViT/DeiT) state dict.

    Args:
        state_dict: timm keys (``patch_embed.proj``, ``blocks.i.*``,
            ``norm``, ``fc_norm``, ``head``, ``cls_token``, ``reg_token``,
            ``pos_embed``, ``blocks.i.attn.gaug.*``).

    Returns:
        The same tensors under ImageClassifier keys (``backbone.*``,
        ``head.layers.head.*``).

    Raises:
        ValueError: If it is not a timm ViT state dict, holds parameters
            LocAtViT has no place for (layer scale, distillation token, ...)
            or non-finite values.
    """
    fmt = detect_vit_format(state_dict)
    if fmt != 'timm':
        raise ValueError(f'expected a timm-format checkpoint, got {fmt}')
    refuse_nonfinite_weights(state_dict, 'the checkpoint')
    state_dict = strip_prefix(state_dict, _WRAPPER_PREFIXES)
    converted, unknown = OrderedDict(), []
    for key, value in state_dict.items():
        new_key = _rename_timm_key(key)
        if new_key:
            converted[new_key] = value
        else:
            unknown.append(key)
    if unknown:
        reasons = sorted({
            why
            for k in unknown
            for hint, why in _UNSUPPORTED_HINTS.items() if hint in k
        })
        raise ValueError(
            f'{len(unknown)} timm parameters have no LocAtViT counterpart' +
            (f' ({", ".join(reasons)} is not supported)' if reasons else '') +
            f': {unknown[:10]}')
    return converted


def convert_vit_to_locat(state_dict: Dict[str, torch.Tensor]) -> 'OrderedDict':
    """Convert any supported ViT-family checkpoint to the LocAtViT layout.

    timm checkpoints are renamed with :func:`convert_timm_locat`; mmpretrain
    ones already use our names (a bare backbone gets ``backbone.``).

    Raises:
        ValueError: For unknown formats, unsupported variants or non-finite
            values.
    """
    fmt = detect_vit_format(state_dict)
    if fmt == 'timm':
        return convert_timm_locat(state_dict)
    refuse_nonfinite_weights(state_dict, 'the checkpoint')
    state_dict = strip_prefix(state_dict, _WRAPPER_PREFIXES)
    if fmt == 'mmpretrain_backbone':
        return OrderedDict(('backbone.' + k, v) for k, v in state_dict.items())
    return OrderedDict(state_dict)
