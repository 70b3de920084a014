"""Dispatch of the GAug attention kernels: dense, chunked, flex, auto.

`Locality-Attending Vision Transformer <https://arxiv.org/abs/2603.04892>`_
(Hajimiri et al., ICLR 2026). :func:`gaug_attention` is the single entry
point of the Gaussian-augmented attention; all kernels compute the same
function to float32 round-off. Pure torch: no OpenMMLab import.
"""
from functools import partial
from typing import Optional, Sequence

import torch
import torch.nn.functional as F

from .bias import GaussianAugment
from .chunked import chunked_gaug_attention
from .flex import FlexFallback, flex_available, flex_gaug_attention

__all__ = ['GAUG_IMPLS', 'gaug_attention', 'resolve_gaug_impl']

GAUG_IMPLS = ('auto', 'dense', 'chunked', 'flex')


def resolve_gaug_impl(impl: str,
                      q: torch.Tensor,
                      needs_grad: bool,
                      attn_drop_p: float = 0.) -> str:
    """The GAug kernel to run: ``impl`` checked, or chosen for ``'auto'``.

    ``'auto'`` (measured with ``tools/analysis_tools/benchmark_gaug.py``):

    * CUDA with Triton, no attention dropout: the compiled FlexAttention
      kernel, in inference and training (fused, differentiable; compiled
      once per input shape, the chunked kernel for a shape whose compile
      fails or beyond the compile budget, see :mod:`.flex`);
    * CPU, inference: the chunked kernel. It is faster than the dense bias
      at every size measured (224 to 1024, ViT-T/B). FlexAttention is not:
      uncompiled it materialises the scores (~15x slower), compiled it
      is no faster than the dense bias here and compiles for tens of
      seconds per input shape;
    * CPU, training: the chunked kernel (FlexAttention has no CPU backward);
      faster than the dense bias and O(block * N) memory;
    * anything else (attention dropout on CUDA, other devices): chunked.

    Args:
        impl: One of :data:`GAUG_IMPLS`.
        q: The query (its device and length decide).
        needs_grad: Whether gradients will flow through the attention.
        attn_drop_p: Attention dropout probability.

    Returns:
        'dense', 'chunked' or 'flex'.
    """
    if impl not in GAUG_IMPLS:
        raise ValueError(f'gaug_cfg=dict(impl=...) must be one of '
                         f'{GAUG_IMPLS}, got {impl!r}')
    if impl == 'flex' and attn_drop_p > 0:
        raise ValueError("gaug_cfg=dict(impl='flex') has no attention "
                         "dropout; use impl='chunked' or 'dense' with "
                         'attn_drop_rate > 0')
    if impl == 'flex' and needs_grad and q.device.type == 'cpu':
        raise NotImplementedError(
            "gaug_cfg=dict(impl='flex') has no backward pass on CPU; run it "
            "under torch.no_grad() or use impl='chunked' / 'auto' for "
            'training')
    if impl != 'auto':
        return impl
    if (q.device.type == 'cuda' and attn_drop_p == 0
            and flex_available(q.device)):
        return 'flex'
    return 'chunked'


def gaug_attention(q: torch.Tensor,
                   k: torch.Tensor,
                   v: torch.Tensor,
                   gaug: Optional[GaussianAugment],
                   hw: Sequence[int],
                   attn_drop_p: float = 0.,
                   impl: str = 'auto') -> torch.Tensor:
    """``softmax(q k^T / sqrt(d) + S) v`` with the GAug bias ``S``.

    The single entry point of the Gaussian-augmented attention. Every
    ``impl`` computes the same function (to float32 round-off):

    * ``'dense'``: the reference, the full (B, heads, N, N) bias as the
      SDPA mask;
    * ``'chunked'``: exact, query blocks, O(block * N) memory in inference
      and training (:func:`~.chunked.chunked_gaug_attention`);
    * ``'flex'``: FlexAttention with the bias in ``score_mod``, compiled
      statically per shape (:func:`~.flex.flex_gaug_attention`; no
      backward on CPU). A shape whose compilation fails, or beyond the
      compile budget, logs one warning and runs ``'chunked'``;
    * ``'auto'``: see :func:`resolve_gaug_impl`.

    Args:
        q, k, v: Per-head tensors (B, heads, N, d); ``q`` is the raw query.
        gaug: The bias module, or ``None`` for plain attention.
        hw: The actual patch grid ``(H, W)``.
        attn_drop_p: Dropout on the attention weights (0 in eval).
        impl: The kernel, one of :data:`GAUG_IMPLS`.

    Returns:
        The attention output (B, heads, N, d).
    """
    if gaug is None:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=attn_drop_p)
    needs_grad = torch.is_grad_enabled() and (
        q.requires_grad or k.requires_grad or v.requires_grad
        or any(p.requires_grad for p in gaug.parameters()))
    impl = resolve_gaug_impl(impl, q, needs_grad, attn_drop_p)
    # Through the module call, so forward hooks (e.g. GAugStatsHook) see it.
    if impl == 'dense':
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=gaug(q, hw), dropout_p=attn_drop_p)
    var, alpha = gaug(q, hw, return_factors=True)
    num_prefix = gaug.num_prefix_tokens
    if impl == 'flex':
        try:
            return flex_gaug_attention(q, k, v, var, alpha, hw, gaug.eps,
                                       gaug.clamp_value(), num_prefix)
        except FlexFallback:
            pass  # warned once for this shape; the exact chunked kernel
    return chunked_gaug_attention(
        q,
        k,
        v,
        var,
        alpha,
        partial(gaug.axis_gauss, hw=tuple(hw)),
        num_prefix,
        dropout_p=attn_drop_p)
