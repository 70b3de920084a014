"""PRR: the patch representation refinement of LocAtViT.

`Locality-Attending Vision Transformer <https://arxiv.org/abs/2603.04892>`_
(Hajimiri et al., ICLR 2026). A parameter-free multi-head self-attention
with ``q = k = v = x`` run over all tokens before the classification head::

    x_h <- softmax(x_h x_h^T / sqrt(d)) x_h      for every head h

Each head is a contiguous chunk of ``d = C / heads`` channels. There are no
projections, residual, norm or dropout. It gives the patch tokens a path to
the classification loss, so the last block's GAug is trained at all. Pure
torch: no OpenMMLab import.
"""
import torch
import torch.nn.functional as F
from torch import nn

__all__ = ['PRR']


class PRR(nn.Module):
    """Parameter-free multi-head self-attention with ``q = k = v = x``.

    Args:
        num_heads: Number of heads; the channels must split evenly.
    """

    def __init__(self, num_heads: int) -> None:
        super().__init__()
        if num_heads < 1:
            raise ValueError(f'num_heads must be >= 1, got {num_heads}')
        self.num_heads = num_heads

    def extra_repr(self) -> str:
        return f'num_heads={self.num_heads}'

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Refine tokens.

        Args:
            x: Tokens (B, N, C).

        Returns:
            Refined tokens (B, N, C).
        """
        if x.dim() != 3 or x.shape[-1] % self.num_heads:
            raise ValueError(f'PRR expects (B, N, C) with C divisible by '
                             f'{self.num_heads} heads, got {tuple(x.shape)}')
        b, n, c = x.shape
        heads = x.reshape(b, n, self.num_heads, c // self.num_heads)
        heads = heads.transpose(1, 2)
        out = F.scaled_dot_product_attention(heads, heads, heads)
        return out.transpose(1, 2).reshape(b, n, c)
