"""Encoder layer of LocAtViT: mmpretrain's ViT block with GAug attention.

`Locality-Attending Vision Transformer <https://arxiv.org/abs/2603.04892>`_
(Hajimiri et al., ICLR 2026). :class:`GAugAttention` is mmpretrain's
``MultiheadAttention`` and :class:`LocAtEncoderLayer` its
``TransformerEncoderLayer``; they override only what GAug changes: the
attention kernel (which adds the bias), the extra ``attn.gaug`` module and
the patch grid ``hw`` as an argument of ``forward``. Parameter names are
the host's (``ln1``, ``attn.qkv``, ``attn.proj``, ``ln2``, ``ffn.layers.*``)
so plain ViT/DeiT checkpoints load.
"""
from typing import Optional, Sequence

import torch
from mmpretrain.models.backbones.vision_transformer import \
    TransformerEncoderLayer
from mmpretrain.models.utils import MultiheadAttention

from ..layers.gaug import (GAUG_IMPLS, GAUG_PRECISIONS, GaussianAugment,
                           gaug_attention)

__all__ = [
    'GAUG_CFG_DEFAULTS', 'build_gaug_cfg', 'GAugAttention', 'LocAtEncoderLayer'
]

#: Keys of ``gaug_cfg`` and their defaults: ``clamp`` the distance terms
#: (turn off to visualise), the kernel ``impl`` (one of
#: :data:`~mmlocat.models.layers.GAUG_IMPLS`), the bias arithmetic
#: ``precision`` ('fp32' or the public code's 'public') and the public
#: code's approximate ``fast`` GAug (see
#: :class:`~mmlocat.models.layers.GaussianAugment`).
GAUG_CFG_DEFAULTS = dict(clamp=True, impl='auto', precision='fp32', fast=False)


def build_gaug_cfg(gaug_cfg: Optional[dict] = None) -> dict:
    """``gaug_cfg`` checked and completed with :data:`GAUG_CFG_DEFAULTS`.

    Args:
        gaug_cfg: Some of the keys of :data:`GAUG_CFG_DEFAULTS`.

    Returns:
        A new dict with every key.

    Raises:
        ValueError: On an unknown key, a bad value, or a dense-only option
            ('public' precision, fast GAug) with the chunked / flex kernel.
    """
    given = dict(gaug_cfg or {})
    unknown = sorted(set(given) - set(GAUG_CFG_DEFAULTS))
    if unknown:
        raise ValueError(f'gaug_cfg has unknown keys {unknown}; valid: '
                         f'{sorted(GAUG_CFG_DEFAULTS)}')
    cfg = {**GAUG_CFG_DEFAULTS, **given}
    if cfg['impl'] not in GAUG_IMPLS:
        raise ValueError(f"gaug_cfg=dict(impl=...) must be one of "
                         f"{GAUG_IMPLS}, got {cfg['impl']!r}")
    if cfg['precision'] not in GAUG_PRECISIONS:
        raise ValueError(f'gaug_cfg=dict(precision=...) must be one of '
                         f"{GAUG_PRECISIONS}, got {cfg['precision']!r}")
    if cfg['impl'] in ('chunked', 'flex') and (cfg['precision'] == 'public'
                                               or cfg['fast']):
        raise ValueError(
            "gaug precision='public' and fast=True need the dense GAug "
            f"kernel; got impl={cfg['impl']!r} (use 'auto' or 'dense')")
    return cfg


class GAugAttention(MultiheadAttention):
    """mmpretrain's multi-head self-attention plus the GAug bias.

    Args:
        embed_dims: Token channels.
        num_heads: Attention heads.
        grid_size: Patch grid at the training resolution (GAug constants).
        num_prefix_tokens: CLS + register tokens before the patches.
        gaug: Add the GAug bias; ``False`` gives plain attention.
        gaug_cfg: GAug options, see :data:`GAUG_CFG_DEFAULTS`.
        **kwargs: ``MultiheadAttention`` arguments (``attn_drop``,
            ``proj_drop``, ``dropout_layer``, ``qkv_bias``, ``proj_bias``,
            ``layer_scale_init_value``, ``init_cfg``). ``input_dims``,
            ``qk_scale`` and ``v_shortcut`` are refused: GAug's kernels
            attend over ``embed_dims`` queries with the standard scale.
    """

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 grid_size: Sequence[int],
                 num_prefix_tokens: int = 1,
                 gaug: bool = True,
                 gaug_cfg: Optional[dict] = None,
                 **kwargs) -> None:
        if embed_dims % num_heads:
            raise ValueError(f'embed_dims {embed_dims} is not divisible by '
                             f'num_heads {num_heads}')
        for key in ('input_dims', 'qk_scale', 'v_shortcut'):
            if kwargs.get(key):
                raise ValueError(f'GAugAttention does not support {key}')
        self.gaug_cfg = build_gaug_cfg(gaug_cfg)
        super().__init__(embed_dims, num_heads, **kwargs)
        self.gaug_impl = self.gaug_cfg['impl']
        self.gaug = GaussianAugment(
            self.head_dims,
            grid_size,
            num_prefix_tokens=num_prefix_tokens,
            clamp=self.gaug_cfg['clamp'],
            precision=self.gaug_cfg['precision'],
            fast=self.gaug_cfg['fast']) if gaug else None

    def forward(self, x: torch.Tensor, hw: Sequence[int]) -> torch.Tensor:
        """Attend over tokens (B, N, C) laid out on the patch grid ``hw``."""
        b, n, _ = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.num_heads, self.head_dims)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        drop = self.attn_drop if self.training else 0.
        impl = self.gaug_impl
        if self.gaug is not None and self.gaug.needs_dense:
            impl = 'dense'
        x = gaug_attention(q, k, v, self.gaug, hw, attn_drop_p=drop, impl=impl)
        x = self.proj(x.transpose(1, 2).reshape(b, n, self.embed_dims))
        return self.out_drop(self.gamma1(self.proj_drop(x)))


class LocAtEncoderLayer(TransformerEncoderLayer):
    """mmpretrain's pre-norm ViT block with :class:`GAugAttention`.

    Args:
        embed_dims: Token channels.
        num_heads: Attention heads.
        feedforward_channels: Hidden channels of the MLP.
        grid_size: Patch grid at the training resolution.
        num_prefix_tokens: CLS + register tokens before the patches.
        gaug: Add the GAug bias.
        gaug_cfg: GAug options, see :data:`GAUG_CFG_DEFAULTS`.
        norm_cfg: Norm layers (LayerNorm, eps 1e-6 by default, as timm's
            ViT and the public LocAtViT).
        **kwargs: The other ``TransformerEncoderLayer`` arguments
            (``layer_scale_init_value``, ``drop_rate``, ``attn_drop_rate``,
            ``drop_path_rate``, ``num_fcs``, ``qkv_bias``, ``ffn_type``,
            ``act_cfg``, ``init_cfg``), with the host's meaning.
    """

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 feedforward_channels: int,
                 grid_size: Sequence[int],
                 num_prefix_tokens: int = 1,
                 gaug: bool = True,
                 gaug_cfg: Optional[dict] = None,
                 norm_cfg: dict = dict(type='LN', eps=1e-6),
                 **kwargs) -> None:
        super().__init__(
            embed_dims,
            num_heads,
            feedforward_channels,
            norm_cfg=norm_cfg,
            **kwargs)
        # The one change to the host block: the attention adds GAug.
        self.attn = GAugAttention(
            embed_dims,
            num_heads,
            grid_size,
            num_prefix_tokens=num_prefix_tokens,
            gaug=gaug,
            gaug_cfg=gaug_cfg,
            attn_drop=kwargs.get('attn_drop_rate', 0.),
            proj_drop=kwargs.get('drop_rate', 0.),
            dropout_layer=dict(
                type='DropPath', drop_prob=kwargs.get('drop_path_rate', 0.)),
            qkv_bias=kwargs.get('qkv_bias', True),
            layer_scale_init_value=kwargs.get('layer_scale_init_value', 0.))

    def forward(self, x: torch.Tensor, hw: Sequence[int]) -> torch.Tensor:
        """Run the block on tokens (B, N, C) laid out on the grid ``hw``."""
        x = x + self.attn(self.ln1(x), hw)
        return self.ffn(self.ln2(x), identity=x)
