"""GAug attention through PyTorch FlexAttention (``score_mod``).

`Locality-Attending Vision Transformer <https://arxiv.org/abs/2603.04892>`_
(Hajimiri et al., ICLR 2026). The Gaussian term is added to each scaled
logit inside the attention kernel from the per-query variance and amplitude
and the token coordinates, so the (N, N) bias never exists. The arithmetic
is the dense reference's, in the same order.

Limits of the installed torch, measured on CPU: FlexAttention has no
backward pass on CPU, and without :func:`torch.compile` it materialises the
full score matrix and is much slower than the dense bias, so the compiled
kernel is used by default (compiled once per shape, tens of seconds on
CPU). On CUDA the compiled kernel is fused and differentiable, gradients
included for the captured variance and amplitude. Pure torch.
"""
from typing import Callable, Optional, Sequence

import torch

__all__ = ['flex_gaug_attention', 'flex_available']

_COMPILED: dict = {}


def _flex_attention() -> Optional[Callable]:
    try:
        from torch.nn.attention.flex_attention import flex_attention
    except ImportError:  # torch < 2.5
        return None
    return flex_attention


def flex_available(device: torch.device) -> bool:
    """Whether a *compiled* FlexAttention kernel can run on ``device``."""
    if _flex_attention() is None:
        return False
    if device.type == 'cuda':
        from torch.utils._triton import has_triton
        return has_triton()
    return device.type == 'cpu'


def _kernel(compiled: bool) -> Callable:
    flex = _flex_attention()
    if flex is None:
        raise RuntimeError('FlexAttention needs torch >= 2.5; use '
                           "gaug_impl='chunked'")
    if not compiled:
        return flex
    if 'kernel' not in _COMPILED:
        _COMPILED['kernel'] = torch.compile(flex)
    return _COMPILED['kernel']


def flex_gaug_attention(q: torch.Tensor,
                        k: torch.Tensor,
                        v: torch.Tensor,
                        var: torch.Tensor,
                        alpha: torch.Tensor,
                        hw: Sequence[int],
                        eps: float,
                        clamp_value: Optional[float],
                        num_prefix: int,
                        compiled: bool = True) -> torch.Tensor:
    """``softmax(q k^T / sqrt(d) + S) v`` with ``S`` added in ``score_mod``.

    Args:
        q, k, v: Per-head tensors (B, heads, N, d), N = num_prefix + H*W.
        var: Per-query-patch variance (row, col), float32
            (B, heads, H*W, 2), already rescaled to this grid.
        alpha: Per-query-patch amplitude, float32 (B, heads, H*W, 1).
        hw: The patch grid ``(H, W)``.
        eps: Added to the variance.
        clamp_value: Lower bound of each per-axis term, ``None`` for none.
        num_prefix: Prefix tokens (zero bias rows and columns).
        compiled: Run the :func:`torch.compile` d kernel (the eager one is
            only a slow reference).

    Returns:
        The attention output (B, heads, N, d) in ``q.dtype``.
    """
    grad = torch.is_grad_enabled() and any(
        t.requires_grad for t in (q, k, v, var, alpha))
    if grad and q.device.type == 'cpu':
        raise NotImplementedError(
            "gaug_impl='flex' has no backward pass on CPU in this torch; "
            "use gaug_impl='chunked' (or 'auto') for training")
    h, w = (int(s) for s in hw)
    n, device = q.shape[2], q.device
    if var.shape[2] != n - num_prefix or h * w != n - num_prefix:
        raise ValueError(f'var {tuple(var.shape)} does not fit {n} tokens '
                         f'with {num_prefix} prefix tokens on a {h}x{w} grid')
    # Per-token tables over all N tokens (prefix entries are never used:
    # the where() below zeroes every pair that involves a prefix token).
    pad = (0, 0, num_prefix, 0)
    den = torch.nn.functional.pad(var + eps, pad, value=1.)
    amp = torch.nn.functional.pad(alpha, pad)[..., 0]
    patch = torch.arange(h * w, device=device)
    prefix = torch.zeros(num_prefix, dtype=torch.float32, device=device)
    row = torch.cat((prefix, (patch // w).float()))
    col = torch.cat((prefix, (patch % w).float()))
    floor = float('-inf') if clamp_value is None else float(clamp_value)

    def score_mod(score, b, head, q_idx, kv_idx):
        d_row = row[q_idx] - row[kv_idx]
        d_col = col[q_idx] - col[kv_idx]
        row_term = torch.clamp(-0.5 * d_row * d_row, min=floor)
        col_term = torch.clamp(-0.5 * d_col * d_col, min=floor)
        expo = (
            row_term / den[b, head, q_idx, 0] +
            col_term / den[b, head, q_idx, 1])
        gauss = amp[b, head, q_idx] * torch.exp(expo)
        both = (q_idx >= num_prefix) & (kv_idx >= num_prefix)
        return score + torch.where(both, gauss, torch.zeros_like(gauss))

    with torch.autocast(device.type, enabled=False):
        return _kernel(compiled)(q, k, v, score_mod=score_mod)
