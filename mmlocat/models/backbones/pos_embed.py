"""Position-embedding resampling: every rule, chosen by one ``pos_embed_cfg``.

A ViT trained at one patch grid resamples the patch part of its absolute
position embedding for inputs of another grid (and on loading a checkpoint
of another grid). Three rules are in use and give measurably different
values; a backbone's ``pos_embed_cfg`` names one (:func:`build_pos_embed_cfg`,
:func:`resample_pos_embed`):

* ``dict(resample='host')``: mmpretrain's ``resize_pos_embed`` (size-based,
  the host's ``interpolate_mode``, no antialias);
* ``dict(resample='timm', antialias=True)``: timm's
  ``resample_abs_pos_embed`` (size-based, float32, antialiased bilinear /
  bicubic), :func:`resample_abs_pos_embed`; the public LocAtViT's;
* ``dict(resample='dino')``: DINO's ``interpolate_pos_encoding``,
  :func:`dino_resample_pos_embed`.

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
from typing import Optional, Sequence

import torch
import torch.nn.functional as F
from mmpretrain.models.utils import resize_pos_embed

__all__ = [
    'POS_EMBED_RESAMPLES', 'build_pos_embed_cfg', 'resample_pos_embed',
    'resample_abs_pos_embed', 'dino_resample_pos_embed'
]

#: The ``resample`` rules of a ``pos_embed_cfg``.
POS_EMBED_RESAMPLES = ('host', 'timm', 'dino')


def build_pos_embed_cfg(cfg: Optional[dict], default: dict) -> dict:
    """A checked ``pos_embed_cfg`` (``None``: ``default``).

    Args:
        cfg: ``dict(resample=...)`` with ``resample`` one of
            :data:`POS_EMBED_RESAMPLES`; ``'timm'`` also takes
            ``antialias`` (default True).
        default: The backbone's default.

    Returns:
        A new dict with every key filled in.

    Raises:
        TypeError: If ``cfg`` is not a dict.
        ValueError: On an unknown rule or key.
    """
    if cfg is None:
        cfg = default
    if not isinstance(cfg, dict):
        raise TypeError(f'pos_embed_cfg must be a dict, got {cfg!r}')
    cfg = dict(cfg)
    rule = cfg.get('resample')
    if rule not in POS_EMBED_RESAMPLES:
        raise ValueError(f'pos_embed_cfg.resample must be one of '
                         f'{POS_EMBED_RESAMPLES}, got {rule!r}')
    allowed = {'resample', 'antialias'} if rule == 'timm' else {'resample'}
    unknown = set(cfg) - allowed
    if unknown:
        raise ValueError(f'pos_embed_cfg with resample={rule!r} takes only '
                         f'{sorted(allowed)}, got {sorted(unknown)}')
    if rule == 'timm':
        cfg['antialias'] = bool(cfg.get('antialias', True))
    return cfg


def resample_pos_embed(pos_embed: torch.Tensor,
                       src_hw: Sequence[int],
                       dst_hw: Sequence[int],
                       num_prefix_tokens: int,
                       cfg: dict,
                       mode: str = 'bicubic') -> torch.Tensor:
    """Resample a ``(1, P + H*W, C)`` embedding to ``dst_hw`` by the rule
    of ``cfg`` (a :func:`build_pos_embed_cfg` result).

    Args:
        pos_embed: Embedding over ``P`` prefix tokens and the grid.
        src_hw: Its grid ``(H, W)``.
        dst_hw: The wanted grid.
        num_prefix_tokens: ``P``.
        cfg: The backbone's ``pos_embed_cfg``.
        mode: Interpolation mode of the size-based rules (the host's
            ``interpolate_mode``); DINO's is bicubic.
    """
    rule = cfg['resample']
    if rule == 'dino':
        return dino_resample_pos_embed(pos_embed, src_hw, dst_hw,
                                       num_prefix_tokens)
    if rule == 'timm':
        return resample_abs_pos_embed(pos_embed, src_hw, dst_hw,
                                      num_prefix_tokens, mode,
                                      cfg['antialias'])
    return resize_pos_embed(
        pos_embed,
        src_hw,
        dst_hw,
        mode=mode,
        num_extra_tokens=num_prefix_tokens)


def resample_abs_pos_embed(pos_embed: torch.Tensor,
                           src_hw: Sequence[int],
                           dst_hw: Sequence[int],
                           num_prefix_tokens: int,
                           mode: str = 'bicubic',
                           antialias: bool = True) -> torch.Tensor:
    """Resample the patch part of a (1, P + H*W, C) position embedding.

    The ``P`` prefix embeddings are kept; the grid part is interpolated in
    float32 with ``align_corners=False`` and (for bilinear / bicubic)
    antialiasing, as timm's ``resample_abs_pos_embed`` does, which is what
    LocAtViT checkpoints were trained and evaluated with.

    Args:
        pos_embed: Embedding of shape (1, P + H*W, C).
        src_hw: Its grid ``(H, W)``.
        dst_hw: The wanted grid.
        num_prefix_tokens: ``P``.
        mode: Interpolation mode.
        antialias: Antialias (ignored for modes that do not support it).

    Returns:
        Embedding of shape (1, P + H'*W', C) in the input dtype.
    """
    src_hw, dst_hw = tuple(src_hw), tuple(dst_hw)
    if src_hw == dst_hw:
        return pos_embed
    if pos_embed.dim() != 3 or (pos_embed.shape[1]
                                != num_prefix_tokens + src_hw[0] * src_hw[1]):
        raise ValueError(
            f'pos_embed of shape {tuple(pos_embed.shape)} does not match '
            f'{num_prefix_tokens} prefix tokens and a {src_hw} grid')
    channels = pos_embed.shape[-1]
    prefix = pos_embed[:, :num_prefix_tokens]
    grid = pos_embed[:, num_prefix_tokens:].float()
    grid = grid.reshape(1, *src_hw, channels).permute(0, 3, 1, 2)
    smooth = mode in ('bilinear', 'bicubic')
    grid = F.interpolate(
        grid,
        size=dst_hw,
        mode=mode,
        align_corners=False if smooth else None,
        antialias=antialias and smooth)
    grid = grid.permute(0, 2, 3, 1).reshape(1, -1, channels)
    return torch.cat((prefix, grid.to(pos_embed.dtype)), dim=1)


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
