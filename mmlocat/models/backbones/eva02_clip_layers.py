"""Building blocks of the EVA02-CLIP image tower: 2-D RoPE, attention, layer.

EVA-02 (Fang et al., "EVA-02: A Visual Representation for Neon Genesis",
https://arxiv.org/abs/2303.11331) and EVA-CLIP (Sun et al., "EVA-CLIP:
Improved Training Techniques for CLIP at Scale",
https://arxiv.org/abs/2303.15389). Written after the public architecture
(baaivision/EVA, ``EVA-CLIP``): separate q/k/v projections with q and v
biases only, 2-D rotary position embedding on the patch tokens, a
LayerNorm before the attention output projection (sub-LN) and a SwiGLU MLP
with a LayerNorm on its hidden units. The MLP is mmpretrain's
:class:`~mmpretrain.models.utils.SwiGLUFFN` (``w12`` = the gate ``w1`` and
the value ``w2`` stacked).
"""
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from mmcv.cnn.bricks.drop import build_dropout
from mmpretrain.models.utils import SwiGLUFFN, build_norm_layer
from torch import Tensor, nn

__all__ = [
    'eva_rope_table', 'apply_eva_rope', 'EVA02CLIPAttention', 'EVA02CLIPLayer'
]

RopeTable = Tuple[Tensor, Tensor]


def eva_rope_table(hw: Tuple[int, int],
                   head_dims: int,
                   pt_seq_len: float = 16,
                   theta: float = 10000.,
                   device: Optional[torch.device] = None) -> RopeTable:
    """Cosine and sine tables of EVA's 2-D rotary embedding for a grid.

    Half of each head's channels rotate with the patch row, the other half
    with the column; channel pairs ``(2i, 2i + 1)`` share one frequency
    ``theta ** (-4i / head_dims)``. Positions are rescaled to the
    pre-training grid, ``t = arange(n) / n * pt_seq_len``, as EVA does with
    ``intp_freq`` (and CLIPSelf when the input size changes), so any grid
    gets positions in ``[0, pt_seq_len)``. Rows and columns are rescaled
    separately, which equals EVA's table for square grids.

    Args:
        hw: Patch grid ``(h, w)``.
        head_dims: Channels per attention head (a multiple of 4).
        pt_seq_len: Grid side the RoPE was pre-trained with (16 for the
            EVA02-CLIP B/16 and L/14 towers).
        theta: Frequency base.
        device: Device of the returned tensors.

    Returns:
        ``(cos, sin)``, each float32 of shape ``(h * w, head_dims)``, rows in
        the row-major patch order.
    """
    if head_dims % 4:
        raise ValueError(f'RoPE needs head_dims divisible by 4, got '
                         f'{head_dims}')
    h, w = hw
    half = head_dims // 2
    freqs = theta**(-torch.arange(0, half, 2, device=device).float() / half)

    def angles(n: int) -> Tensor:
        t = torch.arange(n, device=device).float() / n * pt_seq_len
        return (t[:, None] * freqs[None]).repeat_interleave(2, dim=-1)

    rows = angles(h)[:, None].expand(h, w, half)
    cols = angles(w)[None].expand(h, w, half)
    table = torch.cat((rows, cols), dim=-1).reshape(h * w, head_dims)
    return table.cos(), table.sin()


def apply_eva_rope(x: Tensor, rope: RopeTable) -> Tensor:
    """Rotate channel pairs ``(2i, 2i + 1)`` of ``(..., N, head_dims)``."""
    cos, sin = rope
    pairs = x.unflatten(-1, (-1, 2))
    rotated = torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1).flatten(-2)
    return x * cos.to(x.dtype) + rotated * sin.to(x.dtype)


class EVA02CLIPAttention(nn.Module):
    """Multi-head attention of EVA02-CLIP.

    ``k_proj`` has no bias (EVA keeps the key bias at zero); ``sub_norm``
    normalises the concatenated heads before ``proj``. RoPE rotates the
    queries and keys of the last ``h * w`` tokens (the patches), leaving the
    prefix (CLS) tokens unrotated.

    Args:
        embed_dims: Token channels.
        num_heads: Attention heads.
        qkv_bias: Learn q and v biases.
        norm_cfg: Config of ``sub_norm``; ``None`` for no sub-LN.
        attn_drop: Attention dropout.
        proj_drop: Output dropout.
    """

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 qkv_bias: bool = True,
                 norm_cfg: Optional[dict] = dict(type='LN', eps=1e-6),
                 attn_drop: float = 0.,
                 proj_drop: float = 0.) -> None:
        super().__init__()
        if embed_dims % num_heads:
            raise ValueError(f'embed_dims {embed_dims} is not divisible by '
                             f'num_heads {num_heads}')
        self.embed_dims = embed_dims
        self.num_heads = num_heads
        self.head_dims = embed_dims // num_heads
        self.q_proj = nn.Linear(embed_dims, embed_dims, bias=qkv_bias)
        self.k_proj = nn.Linear(embed_dims, embed_dims, bias=False)
        self.v_proj = nn.Linear(embed_dims, embed_dims, bias=qkv_bias)
        self.attn_drop = attn_drop
        self.sub_norm = (
            build_norm_layer(norm_cfg, embed_dims)
            if norm_cfg is not None else nn.Identity())
        self.proj = nn.Linear(embed_dims, embed_dims)
        self.proj_drop = nn.Dropout(proj_drop)

    def _heads(self, x: Tensor) -> Tensor:
        return x.unflatten(-1,
                           (self.num_heads, self.head_dims)).transpose(1, 2)

    def forward(self, x: Tensor, rope: Optional[RopeTable] = None) -> Tensor:
        """Attend over ``(B, L, C)`` tokens; ``rope`` from
        :func:`eva_rope_table`."""
        q = self._heads(self.q_proj(x))
        k = self._heads(self.k_proj(x))
        v = self._heads(self.v_proj(x))
        if rope is not None:
            start = x.shape[1] - rope[0].shape[0]
            if start < 0:
                raise ValueError(f'RoPE table for {rope[0].shape[0]} patches '
                                 f'but only {x.shape[1]} tokens')
            q = torch.cat(
                (q[:, :, :start], apply_eva_rope(q[:, :, start:], rope)),
                dim=2)
            k = torch.cat(
                (k[:, :, :start], apply_eva_rope(k[:, :, start:], rope)),
                dim=2)
        out = F.scaled_dot_product_attention(
            q, k, v, dropout_p=self.attn_drop if self.training else 0.)
        out = out.transpose(1, 2).flatten(2)
        return self.proj_drop(self.proj(self.sub_norm(out)))

    def value_path(self, x: Tensor) -> Tensor:
        """The attention with query-key mixing removed: each token's own
        value through ``sub_norm`` and ``proj`` (CLIPSelf's F-ViT)."""
        return self.proj_drop(self.proj(self.sub_norm(self.v_proj(x))))


class EVA02CLIPLayer(nn.Module):
    """Pre-norm encoder layer of EVA02-CLIP (RoPE attention + SwiGLU).

    Args:
        embed_dims: Token channels.
        num_heads: Attention heads.
        feedforward_channels: SwiGLU hidden units.
        qkv_bias: Learn q and v biases.
        sub_ln: LayerNorms inside the attention and the MLP (EVA02-CLIP
            uses them).
        norm_cfg: Config of every norm; EVA uses ``LayerNorm(eps=1e-6)``.
        drop_rate: Dropout after the attention and the MLP.
        attn_drop_rate: Attention dropout.
        drop_path_rate: Stochastic depth.
    """

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 feedforward_channels: int,
                 qkv_bias: bool = True,
                 sub_ln: bool = True,
                 norm_cfg: dict = dict(type='LN', eps=1e-6),
                 drop_rate: float = 0.,
                 attn_drop_rate: float = 0.,
                 drop_path_rate: float = 0.) -> None:
        super().__init__()
        self.ln1 = build_norm_layer(norm_cfg, embed_dims)
        self.attn = EVA02CLIPAttention(
            embed_dims,
            num_heads,
            qkv_bias=qkv_bias,
            norm_cfg=norm_cfg if sub_ln else None,
            attn_drop=attn_drop_rate,
            proj_drop=drop_rate)
        self.ln2 = build_norm_layer(norm_cfg, embed_dims)
        self.ffn = SwiGLUFFN(
            embed_dims=embed_dims,
            feedforward_channels=feedforward_channels,
            dropout_layer=(dict(type='Dropout', drop_prob=drop_rate)
                           if drop_rate > 0 else None),
            norm_cfg=norm_cfg if sub_ln else None,
            add_identity=False)
        self.drop_path = build_dropout(
            dict(type='DropPath', drop_prob=drop_path_rate))

    def forward(self, x: Tensor, rope: Optional[RopeTable] = None) -> Tensor:
        """Run the layer on ``(B, L, C)`` tokens."""
        x = x + self.drop_path(self.attn(self.ln1(x), rope))
        return x + self.drop_path(self.ffn(self.ln2(x)))

    def forward_value_path(self, x: Tensor) -> Tensor:
        """The layer with :meth:`EVA02CLIPAttention.value_path` in place of
        the attention; residuals and MLP kept."""
        x = x + self.attn.value_path(self.ln1(x))
        return x + self.ffn(self.ln2(x))
