"""Exact GAug attention in query blocks, without the (N, N) bias.

`Locality-Attending Vision Transformer <https://arxiv.org/abs/2603.04892>`_
(Hajimiri et al., ICLR 2026). The Gaussian term of GAug is separable over
the two grid axes, so for query patch ``p`` and key patch ``(r, c)``::

    S[p, (r, c)] = row_gauss[p, r] * col_gauss[p, c]
    row_gauss[p, r] = alpha_p * exp(row_term[p, r] / (var_row_p + eps))
    col_gauss[p, c] = exp(col_term[p, c] / (var_col_p + eps))

The factor tables and the bias are built for one block of queries at a
time, attended with that block, and dropped, so memory is O(block * N)
instead of O(heads * N^2), in training as well:

* inference: one fused SDPA call per block (:mod:`._blocks`);
* training: a :class:`torch.autograd.Function` that keeps only the inputs,
  the per-query ``var`` / ``alpha``, the output and the row log-sum-exp,
  and recomputes each block's factor tables and probabilities in the
  backward pass (the FlashAttention recipe, in plain torch). Gradients for
  q, k, v, ``var`` and ``alpha`` are exact;
* attention dropout in training: each block under non-reentrant
  :func:`torch.utils.checkpoint.checkpoint` (RNG state restored, so the
  recomputed dropout mask is the one of the forward pass).

Pure torch: no OpenMMLab import.
"""
import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable
from torch.utils.checkpoint import checkpoint

from ._blocks import (DEFAULT_BLOCK_ELEMENTS, GaussFn, forward_blocks,
                      new_bias, plan_blocks, query_blocks)

__all__ = ['chunked_gaug_attention']

_MIN_BACKWARD_ROWS = 64


class _ChunkedGAugFunction(torch.autograd.Function):
    """Blocked GAug attention with recomputation in the backward pass."""

    @staticmethod
    def forward(ctx, q, k, v, var, alpha, gauss_fn, num_prefix, plan,
                block_elements, block_size):
        # Dtypes are handled explicitly: autocast must not recast them.
        with torch.autocast(q.device.type, enabled=False):
            out, lse = forward_blocks(q, k, v, var, alpha, gauss_fn,
                                      num_prefix, plan, True)
        ctx.save_for_backward(q, k, v, var, alpha, out, lse)
        ctx.gauss_fn, ctx.num_prefix = gauss_fn, num_prefix
        ctx.block_elements, ctx.block_size = block_elements, block_size
        return out

    @staticmethod
    @once_differentiable  # the recomputed backward is not differentiable
    def backward(ctx, grad_out):
        with torch.autocast(grad_out.device.type, enabled=False):
            grads = _backward_blocks(ctx, grad_out)
        return grads + (None, ) * 5


def _backward_blocks(ctx, grad_out):
    """Exact gradients, recomputing tables and probabilities per block."""
    q, k, v, var, alpha, out, lse = ctx.saved_tensors
    num_prefix = ctx.num_prefix
    b, h, n, d = q.shape
    bh, num_patches = b * h, n - num_prefix
    scale = 1 / math.sqrt(d)
    # A quarter of the forward budget: the backward holds ~4 such buffers
    # and is fastest with ~128-256 (B * heads)-batched rows (measured).
    queries = ctx.block_size or max(_MIN_BACKWARD_ROWS,
                                    ctx.block_elements // 4 // (bh * n))
    # (B * heads)-batched float32 math: low-precision inputs are upcast
    # exactly, so the recomputed logits match the forward pass's.
    # contiguous(): an expanded upstream gradient (``out.sum()``) would
    # make every batched gemm below split into per-batch calls.
    q3, k3, v3, dout, out3 = (
        t.reshape(bh, n, d).float().contiguous()
        for t in (q, k, v, grad_out, out))
    var3 = var.reshape(bh, num_patches, 2)
    alpha3 = alpha.reshape(bh, num_patches, 1)
    neg_lse = -lse.reshape(bh, n, 1)
    delta = (dout * out3).sum(-1, keepdim=True)  # rowsum(dO * O)
    # (d, N) layouts, contiguous: the batched gemms below then run as one
    # MKL call each (with transposed views they can split into per-batch
    # addmm calls, measured ~5x slower).
    k_t, v_t = k3.transpose(1, 2).contiguous(), v3.transpose(1, 2)
    dq = torch.empty_like(q3)
    dk_t, dv = k3.new_zeros(bh, d, n), torch.zeros_like(v3)
    d_var, d_alpha = torch.empty_like(var3), torch.empty_like(alpha3)
    for start, end in query_blocks(n, num_prefix, queries):
        rows = end - start
        q_blk = q3[:, start:end] * scale
        do_blk = dout[:, start:end]
        # probs = exp(q k^T / sqrt(d) + bias - lse), accumulated in place
        # on top of (bias - lse).
        patch = start >= num_prefix
        if patch:
            s, e = start - num_prefix, end - num_prefix
            with torch.enable_grad():  # the tables' graph, this block only
                var_blk = var3[:, s:e].detach().requires_grad_()
                alpha_blk = alpha3[:, s:e].detach().requires_grad_()
                tables = ctx.gauss_fn(var_blk, alpha_blk, start=s)
            r_blk, c_blk = (t.detach() for t in tables)
            # The forward pass saw the bias rounded to q's dtype.
            probs = new_bias(r_blk, c_blk, num_prefix, n, q.dtype).float()
            probs.add_(neg_lse[:, start:end])
        else:
            probs = neg_lse[:, start:end].expand(bh, rows, n).clone()
        probs.baddbmm_(q_blk, k_t).exp_()
        dv.baddbmm_(probs.transpose(1, 2), do_blk)
        # d_logits = probs * (dO v^T - rowsum(dO * O)); bmm, then in place
        # (baddbmm would first expand the (rows, 1) term to a full copy).
        d_logits = torch.bmm(do_blk, v_t)
        d_logits.sub_(delta[:, start:end]).mul_(probs)
        del probs
        dq[:, start:end] = torch.bmm(d_logits, k3).mul_(scale)
        dk_t.baddbmm_(q_blk.transpose(1, 2), d_logits)
        if patch:
            # d_logits is the bias gradient; the bias is the outer product
            # row_gauss[p, r] * col_gauss[p, c]: reduce over each axis, as
            # (B * heads * rows) small matmuls on a view (no copy), then
            # through the tables to var and alpha.
            height, width = r_blk.shape[-1], c_blk.shape[-1]
            d_bias = d_logits[..., num_prefix:].view(bh * rows, height, width)
            d_row = torch.bmm(d_bias, c_blk.reshape(-1, width, 1))
            d_col = torch.bmm(r_blk.reshape(-1, 1, height), d_bias)
            d_var[:, s:e], d_alpha[:, s:e] = torch.autograd.grad(
                tables, (var_blk, alpha_blk),
                (d_row.view_as(r_blk), d_col.view_as(c_blk)))
    dk = dk_t.transpose(1, 2)
    return (dq.view(b, h, n, d).to(q.dtype), dk.reshape(b, h, n,
                                                        d).to(k.dtype),
            dv.view(b, h, n,
                    d).to(v.dtype), d_var.view_as(var), d_alpha.view_as(alpha))


def _sdpa_block(q_blk: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                var: torch.Tensor, alpha: torch.Tensor, gauss_fn: GaussFn,
                start: int, num_prefix: int, dropout_p: float) -> torch.Tensor:
    bias = new_bias(*gauss_fn(var, alpha, start=start), num_prefix, k.shape[2],
                    q_blk.dtype)
    return F.scaled_dot_product_attention(
        q_blk, k, v, attn_mask=bias, dropout_p=dropout_p)


def chunked_gaug_attention(q: torch.Tensor,
                           k: torch.Tensor,
                           v: torch.Tensor,
                           var: torch.Tensor,
                           alpha: torch.Tensor,
                           gauss_fn: GaussFn,
                           num_prefix: int,
                           dropout_p: float = 0.,
                           block_elements: int = DEFAULT_BLOCK_ELEMENTS,
                           block_size: Optional[int] = None) -> torch.Tensor:
    """``softmax(q k^T / sqrt(d) + S) v`` with ``S`` built block by block.

    Args:
        q, k, v: Per-head tensors (B, heads, N, d), N = num_prefix + H*W.
        var: Per-query-patch variance (row, col), float32 (B, heads, H*W,
            2).
        alpha: Per-query-patch amplitude, float32 (B, heads, H*W, 1).
        gauss_fn: ``(var, alpha, start) -> (row_gauss, col_gauss)``: the
            float32 factor tables (..., P, H) and (..., P, W) of the ``P``
            query patches from ``start`` (``GaussianAugment.axis_gauss``
            with its grid bound); differentiable.
        num_prefix: Prefix tokens (zero bias rows and columns).
        dropout_p: Dropout on the attention weights.
        block_elements: Bias elements held at a time (see
            :func:`~._blocks.plan_blocks`); 4M (16 MiB float32).
        block_size: Force this many query patches per block.

    Returns:
        The attention output (B, heads, N, d) in ``q.dtype``.
    """
    b, h, n, _ = q.shape
    num_patches = n - num_prefix
    if var.shape != (b, h, num_patches, 2) or alpha.shape != (b, h,
                                                              num_patches, 1):
        raise ValueError(
            f'var {tuple(var.shape)} / alpha {tuple(alpha.shape)} do not '
            f'fit q {tuple(q.shape)} with {num_prefix} prefix tokens')
    needs_grad = torch.is_grad_enabled() and any(
        t.requires_grad for t in (q, k, v, var, alpha))
    plan = plan_blocks(b, h, num_patches, n, block_elements, block_size)
    if not needs_grad:
        return forward_blocks(q, k, v, var, alpha, gauss_fn, num_prefix, plan,
                              False, dropout_p)[0]
    if dropout_p == 0:
        return _ChunkedGAugFunction.apply(q, k, v, var, alpha, gauss_fn,
                                          num_prefix, plan, block_elements,
                                          block_size)
    # Training with attention dropout: checkpointed query blocks, so the
    # recomputation replays the forward pass's dropout mask.
    queries = block_size or max(1, block_elements // (b * h * n))
    outs = []
    for start, end in query_blocks(n, num_prefix, queries):
        q_blk = q[:, :, start:end]
        if start < num_prefix:
            outs.append(
                F.scaled_dot_product_attention(
                    q_blk, k, v, dropout_p=dropout_p))
            continue
        s, e = start - num_prefix, end - num_prefix
        outs.append(
            checkpoint(
                _sdpa_block,
                q_blk,
                k,
                v,
                var[:, :, s:e],
                alpha[:, :, s:e],
                gauss_fn,
                s,
                num_prefix,
                dropout_p,
                use_reentrant=False))
    return torch.cat(outs, dim=2)
