"""Blocks of the exact chunked GAug attention: planning and forward pass.

`Locality-Attending Vision Transformer <https://arxiv.org/abs/2603.04892>`_
(Hajimiri et al., ICLR 2026). Helpers of :mod:`.chunked`: how the
(batch, heads, queries, keys) bias is cut into blocks of bounded size, how
one block's bias is written from the two separable factor tables, and the
forward pass over all blocks with a single reused bias buffer.

Pure torch: no OpenMMLab import.
"""
import math
from typing import Callable, NamedTuple, Optional, Tuple

import torch
import torch.nn.functional as F

__all__ = [
    'BlockPlan', 'plan_blocks', 'fill_bias', 'new_bias', 'forward_blocks',
    'query_blocks', 'DEFAULT_BLOCK_ELEMENTS', 'GaussFn'
]

# Elements of one bias block: 4M float32 values (16 MiB) keep the working
# set small while each attention call stays large enough to run at full
# speed (measured on CPU, ViT-T/B, N up to 4097).
DEFAULT_BLOCK_ELEMENTS = 1 << 22
# The CPU flash kernel tiles queries by 256 when it gets >= 768 of them
# (smaller tiles below), so blocks are multiples of this when split.
_Q_TILE = 256

# gauss_fn(var, alpha, start=first query patch) -> (row_gauss, col_gauss)
GaussFn = Callable[[torch.Tensor, torch.Tensor, int], Tuple[torch.Tensor,
                                                            torch.Tensor]]

_cpu_flash = getattr(torch.ops.aten,
                     '_scaled_dot_product_flash_attention_for_cpu', None)


class BlockPlan(NamedTuple):
    """Batch items, heads and query patches attended per call."""
    batch: int
    heads: int
    queries: int


def plan_blocks(batch: int,
                heads: int,
                num_patches: int,
                num_tokens: int,
                block_elements: int = DEFAULT_BLOCK_ELEMENTS,
                block_size: Optional[int] = None) -> BlockPlan:
    """Split the (batch, heads, query patches) bias into blocks.

    Queries first (whole tiles of the CPU kernel), then heads, then batch
    items are grouped while one block's bias stays within
    ``block_elements``; few large calls run fastest.

    Args:
        batch, heads, num_patches, num_tokens: The problem size.
        block_elements: Bias elements per block.
        block_size: Force this many query patches per block.

    Returns:
        The :class:`BlockPlan`.
    """
    if block_size is not None:
        queries = max(1, min(block_size, num_patches))
    elif num_patches * num_tokens <= block_elements:
        queries = num_patches
    else:
        queries = block_elements // num_tokens // _Q_TILE * _Q_TILE
        queries = min(max(queries, _Q_TILE), num_patches)
    per_head = queries * num_tokens
    group_heads = max(1, min(heads, block_elements // per_head))
    group_batch = 1
    if group_heads == heads:
        group_batch = max(1, min(batch, block_elements // (heads * per_head)))
    return BlockPlan(group_batch, group_heads, queries)


def fill_bias(bias: torch.Tensor, row_gauss: torch.Tensor,
              col_gauss: torch.Tensor, num_prefix: int) -> torch.Tensor:
    """Write the bias rows of a block of query patches into ``bias``.

    Prefix key columns are 0; patch columns are the outer product of the
    factor tables, written straight into the (H, W) view of each row.
    """
    *lead, rows, height = row_gauss.shape
    bias[..., :num_prefix] = 0
    torch.mul(
        row_gauss[..., :, None],
        col_gauss[..., None, :],
        out=bias[..., num_prefix:].view(*lead, rows, height,
                                        col_gauss.shape[-1]))
    return bias


def new_bias(row_gauss: torch.Tensor, col_gauss: torch.Tensor, num_prefix: int,
             num_tokens: int, dtype: torch.dtype) -> torch.Tensor:
    """The bias rows of a block in a new tensor; differentiable when the
    factor tables require grad (then not written in place)."""
    if torch.is_grad_enabled() and (row_gauss.requires_grad
                                    or col_gauss.requires_grad):
        bias = row_gauss[..., :, None] * col_gauss[..., None, :]
        return F.pad(bias.flatten(-2), (num_prefix, 0)).to(dtype)
    bias = row_gauss.new_empty(*row_gauss.shape[:-1], num_tokens, dtype=dtype)
    return fill_bias(bias, row_gauss, col_gauss, num_prefix)


def _attend(q, k, v, bias, with_lse, dropout_p=0.):
    """Output (and float32 row log-sum-exp if ``with_lse``) of a block."""
    if not with_lse:
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=bias, dropout_p=dropout_p), None
    if q.device.type == 'cpu' and _cpu_flash is not None:
        return _cpu_flash(q, k, v, attn_mask=bias)
    logits = torch.matmul(q.float(), k.float().transpose(-2, -1))
    logits *= 1 / math.sqrt(q.shape[-1])
    if bias is not None:
        logits += bias.float()
    lse = torch.logsumexp(logits, dim=-1)
    probs = torch.exp(logits - lse[..., None])
    return torch.matmul(probs, v.float()).to(q.dtype), lse


def forward_blocks(
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        var: torch.Tensor,
        alpha: torch.Tensor,
        gauss_fn: GaussFn,
        num_prefix: int,
        plan: BlockPlan,
        with_lse: bool,
        dropout_p: float = 0.) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """The whole forward pass, one bias block at a time (one buffer).

    The factor tables are computed per block too, so nothing but the
    output grows with the number of queries.

    Args:
        q, k, v: Per-head tensors (B, heads, N, d).
        var, alpha: Per-query-patch GAug factors (B, heads, H*W, 2 / 1).
        gauss_fn: ``(var, alpha, start) -> (row_gauss, col_gauss)`` for the
            query patches from ``start`` (see
            :func:`~.chunked.chunked_gaug_attention`).
        num_prefix: Prefix tokens (zero bias rows and columns).
        plan: The blocks (:func:`plan_blocks`).
        with_lse: Also return the float32 row log-sum-exp (B, heads, N).
        dropout_p: Attention dropout (only without ``with_lse``).

    Returns:
        The output (B, heads, N, d) and the log-sum-exp or ``None``.
    """
    b, h, n, _ = q.shape
    num_patches = n - num_prefix
    # (B, N, heads, d) memory, as SDPA returns: the caller's
    # transpose(1, 2).reshape(B, N, C) is then a view.
    out = q.new_empty(b, n, h, q.shape[-1]).transpose(1, 2)
    lse = q.new_empty((b, h, n), dtype=torch.float32) if with_lse else None
    if num_prefix:  # prefix queries: no bias at all
        o, l_ = _attend(q[:, :, :num_prefix], k, v, None, with_lse, dropout_p)
        out[:, :, :num_prefix] = o
        if with_lse:
            lse[:, :, :num_prefix] = l_
    buffer = q.new_empty(plan.batch * plan.heads * plan.queries * n)
    for b0 in range(0, b, plan.batch):
        b1 = min(b0 + plan.batch, b)
        for h0 in range(0, h, plan.heads):
            h1 = min(h0 + plan.heads, h)
            for s0 in range(0, num_patches, plan.queries):
                s1 = min(s0 + plan.queries, num_patches)
                grid = (slice(b0, b1), slice(h0, h1))
                rows = grid + (slice(num_prefix + s0, num_prefix + s1), )
                patches = grid + (slice(s0, s1), )
                bias = buffer[:(b1 - b0) * (h1 - h0) * (s1 - s0) * n].view(
                    b1 - b0, h1 - h0, s1 - s0, n)
                fill_bias(bias,
                          *gauss_fn(var[patches], alpha[patches], start=s0),
                          num_prefix)
                o, l_ = _attend(q[rows], k[grid], v[grid], bias, with_lse,
                                dropout_p)
                out[rows] = o
                if with_lse:
                    lse[rows] = l_
    return out, lse


def query_blocks(num_tokens: int, num_prefix: int, queries: int):
    """(start, end) token ranges: the prefix rows, then patch blocks."""
    if num_prefix:
        yield 0, num_prefix
    for start in range(num_prefix, num_tokens, queries):
        yield start, min(start + queries, num_tokens)
