"""Encoder layer of LocAtViT: a ViT block whose attention adds GAug.

`Locality-Attending Vision Transformer <https://arxiv.org/abs/2603.04892>`_
(Hajimiri et al., ICLR 2026). Parameter names follow mmpretrain's
``TransformerEncoderLayer`` (``ln1``, ``attn.qkv``, ``attn.proj``, ``ln2``,
``ffn.layers.*``) so plain ViT/DeiT checkpoints load; the new parameters
live under ``attn.gaug``. The patch grid is an argument of ``forward``.
"""
from typing import Optional, Sequence

import torch
from mmcv.cnn.bricks.drop import build_dropout
from mmcv.cnn.bricks.transformer import FFN
from mmengine.model import BaseModule
from mmpretrain.models.utils import build_norm_layer
from torch import nn

from ..layers.gaug import GAUG_IMPLS, GaussianAugment, gaug_attention

__all__ = ['GAugAttention', 'LocAtEncoderLayer']


class GAugAttention(BaseModule):
    """Multi-head self-attention with the Gaussian bias of LocAtViT.

    Args:
        embed_dims: Token channels.
        num_heads: Attention heads.
        grid_size: Patch grid at the training resolution (GAug constants).
        num_prefix_tokens: CLS + register tokens before the patches.
        gaug: Add the GAug bias; ``False`` gives plain attention.
        gaug_clamp: Clamp the GAug distance terms (see
            :class:`~mmlocat.models.layers.GaussianAugment`).
        gaug_impl: GAug kernel: 'auto', 'dense' (reference), 'chunked' or
            'flex' (see :func:`~mmlocat.models.layers.gaug_attention`).
        gaug_precision: 'fp32' (default) or 'public' (the bias arithmetic
            in the autocast dtype, as the public code; runs the dense
            kernel).
        gaug_fast: The public code's opt-in approximate fast GAug (see
            :class:`~mmlocat.models.layers.GaussianAugment`); runs the dense
            kernel while active.
        attn_drop: Dropout on the attention weights.
        proj_drop: Dropout after the output projection.
        drop_path_rate: Stochastic depth of the attention branch.
        qkv_bias: Bias in the qkv projection.
        init_cfg: Initialisation config.
    """

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 grid_size: Sequence[int],
                 num_prefix_tokens: int = 1,
                 gaug: bool = True,
                 gaug_clamp: bool = True,
                 gaug_impl: str = 'auto',
                 gaug_precision: str = 'fp32',
                 gaug_fast: bool = False,
                 attn_drop: float = 0.,
                 proj_drop: float = 0.,
                 drop_path_rate: float = 0.,
                 qkv_bias: bool = True,
                 init_cfg: Optional[dict] = None) -> None:
        super().__init__(init_cfg=init_cfg)
        if embed_dims % num_heads:
            raise ValueError(f'embed_dims {embed_dims} is not divisible by '
                             f'num_heads {num_heads}')
        self.embed_dims = embed_dims
        self.num_heads = num_heads
        self.head_dims = embed_dims // num_heads
        if gaug_impl not in GAUG_IMPLS:
            raise ValueError(f'gaug_impl must be one of {GAUG_IMPLS}, got '
                             f'{gaug_impl!r}')
        if gaug_impl in ('chunked', 'flex') and (gaug_precision == 'public'
                                                 or gaug_fast):
            raise ValueError(
                f"gaug_precision='public' and gaug_fast need the dense GAug "
                f"kernel; got gaug_impl={gaug_impl!r} (use 'auto' or 'dense')")
        self.gaug_impl = gaug_impl
        self.attn_drop = attn_drop
        self.qkv = nn.Linear(embed_dims, embed_dims * 3, bias=qkv_bias)
        self.proj = nn.Linear(embed_dims, embed_dims)
        self.proj_drop = nn.Dropout(proj_drop)
        self.out_drop = build_dropout(
            dict(type='DropPath', drop_prob=drop_path_rate))
        self.gaug = GaussianAugment(
            self.head_dims,
            grid_size,
            num_prefix_tokens=num_prefix_tokens,
            clamp=gaug_clamp,
            precision=gaug_precision,
            fast=gaug_fast) if gaug else None

    def forward(self, x: torch.Tensor, hw: Sequence[int]) -> torch.Tensor:
        """Attend over tokens (B, N, C) laid out on the patch grid ``hw``."""
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.num_heads, self.head_dims)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        drop = self.attn_drop if self.training else 0.
        impl = self.gaug_impl
        if self.gaug is not None and self.gaug.needs_dense:
            impl = 'dense'
        x = gaug_attention(q, k, v, self.gaug, hw, attn_drop_p=drop, impl=impl)
        x = x.transpose(1, 2).reshape(b, n, c)
        x = self.proj_drop(self.proj(x))
        return self.out_drop(x)


class LocAtEncoderLayer(BaseModule):
    """Pre-norm ViT block with :class:`GAugAttention`.

    Args:
        embed_dims: Token channels.
        num_heads: Attention heads.
        feedforward_channels: Hidden channels of the MLP.
        grid_size: Patch grid at the training resolution.
        num_prefix_tokens: CLS + register tokens before the patches.
        gaug: Add the GAug bias.
        gaug_clamp: Clamp the GAug distance terms.
        gaug_impl: GAug kernel ('auto', 'dense', 'chunked', 'flex').
        gaug_precision: GAug arithmetic, 'fp32' or 'public'.
        gaug_fast: The public code's opt-in fast GAug.
        drop_rate: Dropout after the projections / in the MLP.
        attn_drop_rate: Dropout on the attention weights.
        drop_path_rate: Stochastic depth rate.
        qkv_bias: Bias in the qkv projection.
        act_cfg: MLP activation (exact GELU by default).
        norm_cfg: Norm layers (LayerNorm, eps 1e-6 by default).
        init_cfg: Initialisation config.
    """

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 feedforward_channels: int,
                 grid_size: Sequence[int],
                 num_prefix_tokens: int = 1,
                 gaug: bool = True,
                 gaug_clamp: bool = True,
                 gaug_impl: str = 'auto',
                 gaug_precision: str = 'fp32',
                 gaug_fast: bool = False,
                 drop_rate: float = 0.,
                 attn_drop_rate: float = 0.,
                 drop_path_rate: float = 0.,
                 qkv_bias: bool = True,
                 act_cfg: dict = dict(type='GELU'),
                 norm_cfg: dict = dict(type='LN', eps=1e-6),
                 init_cfg: Optional[dict] = None) -> None:
        super().__init__(init_cfg=init_cfg)
        self.embed_dims = embed_dims
        self.ln1 = build_norm_layer(norm_cfg, embed_dims)
        self.attn = GAugAttention(
            embed_dims,
            num_heads,
            grid_size,
            num_prefix_tokens=num_prefix_tokens,
            gaug=gaug,
            gaug_clamp=gaug_clamp,
            gaug_impl=gaug_impl,
            gaug_precision=gaug_precision,
            gaug_fast=gaug_fast,
            attn_drop=attn_drop_rate,
            proj_drop=drop_rate,
            drop_path_rate=drop_path_rate,
            qkv_bias=qkv_bias)
        self.ln2 = build_norm_layer(norm_cfg, embed_dims)
        self.ffn = FFN(
            embed_dims=embed_dims,
            feedforward_channels=feedforward_channels,
            num_fcs=2,
            ffn_drop=drop_rate,
            dropout_layer=dict(type='DropPath', drop_prob=drop_path_rate),
            act_cfg=act_cfg)

    @property
    def norm1(self) -> nn.Module:
        return self.ln1

    @property
    def norm2(self) -> nn.Module:
        return self.ln2

    def init_weights(self) -> None:
        super().init_weights()
        # Same MLP initialisation as mmpretrain's ViT layer, so LocAtViT
        # and its plain-ViT twin start from the same distribution.
        for m in self.ffn.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.normal_(m.bias, std=1e-6)

    def forward(self, x: torch.Tensor, hw: Sequence[int]) -> torch.Tensor:
        """Run the block on tokens (B, N, C) laid out on the grid ``hw``."""
        x = x + self.attn(self.ln1(x), hw)
        return self.ffn(self.ln2(x), identity=x)
