"""Position-embedding resampling as DINO does it.

DINO (Caron et al., https://arxiv.org/abs/2104.14294; facebookresearch/dino
``VisionTransformer.interpolate_pos_encoding``), and LOST / LaSt-ViT's CorLoc
evaluation built on it, resample the patch part of the embedding with a
*scale factor* ``(h + 0.1) / side`` (``w`` likewise) instead of a target
size, bicubic, without antialiasing. The 0.1 only makes the output size
come out as ``h``; the scale factor itself enters the sampling positions,
so the values differ slightly from a size-based resampling (mmpretrain's
``resize_pos_embed`` or timm's ``resample_abs_pos_embed``, which timm's DINO
models use). Restated from the public code's behaviour, not copied.
"""
import math
from typing import Sequence

import torch
import torch.nn.functional as F

__all__ = ['dino_resample_pos_embed']


def dino_resample_pos_embed(pos_embed: torch.Tensor,
                            src_hw: Sequence[int],
                            dst_hw: Sequence[int],
                            num_prefix_tokens: int = 1) -> torch.Tensor:
    """Resample a ``(1, P + H*W, C)`` embedding to the grid ``dst_hw``.

    Args:
        pos_embed: Embedding over ``P`` prefix tokens and a square grid.
        src_hw: Its grid; DINO's rule needs it square.
        dst_hw: The wanted grid ``(h, w)``.
        num_prefix_tokens: ``P`` (1 for DINO: the CLS token).

    Returns:
        The embedding for ``dst_hw``, unchanged when the grids are equal
        (DINO skips the resampling then; it also resamples a same-grid
        embedding when the *pixel* size is not square, which cannot happen
        for an input whose sides are multiples of the patch size: LOST
        zero-pads to one, the ``padding='corner'`` patch embedding, and
        DINO's ``visualize_attention.py`` crops to one).

    Raises:
        ValueError: If the source grid is not square or does not match.
    """
    src_hw = tuple(int(s) for s in src_hw)
    dst_hw = tuple(int(s) for s in dst_hw)
    side = src_hw[0]
    if src_hw[1] != side:
        raise ValueError(f'DINO position-embedding resampling needs a square '
                         f'source grid, got {src_hw}')
    length = num_prefix_tokens + side * side
    if pos_embed.dim() != 3 or pos_embed.shape[1] != length:
        raise ValueError(
            f'pos_embed of shape {tuple(pos_embed.shape)} does not match '
            f'{num_prefix_tokens} prefix tokens and a {src_hw} grid')
    if dst_hw == src_hw:
        return pos_embed
    channels = pos_embed.shape[-1]
    prefix = pos_embed[:, :num_prefix_tokens]
    grid = pos_embed[:, num_prefix_tokens:].reshape(1, side, side, channels)
    # +0.1: DINO's guard against a float scale that floors one short.
    scale = tuple((s + 0.1) / math.sqrt(side * side) for s in dst_hw)
    grid = F.interpolate(
        grid.permute(0, 3, 1, 2), scale_factor=scale, mode='bicubic')
    if tuple(grid.shape[-2:]) != dst_hw:
        raise RuntimeError(f'DINO resampling gave {tuple(grid.shape[-2:])} '
                           f'for the grid {dst_hw}')
    grid = grid.permute(0, 2, 3, 1).reshape(1, -1, channels)
    return torch.cat((prefix, grid), dim=1)
