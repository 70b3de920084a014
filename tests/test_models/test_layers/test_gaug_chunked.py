"""Chunked GAug kernel: grouping, attention dropout, bounded memory, errors
(exactness against the dense bias for every case: test_gaug_kernels.py)."""
import functools
import math

import pytest
import torch
import torch.nn.functional as F

from mmlocat.models.layers import GaussianAugment, chunked_gaug_attention
from mmlocat.models.layers.gaug._blocks import query_blocks


def make(hw=(5, 7), num_prefix=2, batch=2, heads=3, seed=0):
    torch.manual_seed(seed)
    gaug = GaussianAugment(8, (3, 4), num_prefix)
    with torch.no_grad():
        for p in gaug.parameters():
            p.normal_(0, 0.3)
    n = num_prefix + hw[0] * hw[1]
    qkv = torch.randn(3, batch, heads, n, 8).unbind(0)
    return gaug, qkv


def chunked(gaug, q, k, v, hw, **kwargs):
    var, alpha = gaug(q, hw, return_factors=True)
    return chunked_gaug_attention(q, k, v, var, alpha,
                                  functools.partial(gaug.axis_gauss, hw=hw),
                                  gaug.num_prefix_tokens, **kwargs)


def dense(gaug, q, k, v, hw):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=gaug(q, hw))


@pytest.mark.parametrize(
    'block_elements,block_size',
    [
        (10**9, None),  # all batch items and heads in one call
        (2 * 3 * 35 * 37, None),  # grouped heads, one batch item a call
        (35 * 37, 8),  # one head a call, query blocks of 8
        (1, 1),  # one query a call
    ])
@pytest.mark.parametrize('grad', [False, True])
def test_every_grouping_is_exact(block_elements, block_size, grad):
    hw = (5, 7)
    gaug, (q, k, v) = make(hw)
    with torch.set_grad_enabled(grad):
        ref = dense(gaug, q, k, v, hw)
        out = chunked(
            gaug,
            q,
            k,
            v,
            hw,
            block_elements=block_elements,
            block_size=block_size)
    assert out.requires_grad == grad
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


def test_inference_mode():
    hw = (5, 7)
    gaug, (q, k, v) = make(hw)
    with torch.inference_mode():
        out = chunked(gaug, q, k, v, hw, block_size=4)
        ref = dense(gaug, q, k, v, hw)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


def test_dropout_mask_is_replayed_in_backward():
    """With attention dropout, each block is checkpointed: the backward pass
    recomputes it under the forward pass's RNG state. The reference runs
    the same blocks, in the same RNG order, without recomputation."""
    hw, p_drop = (5, 7), 0.3
    gaug, qkv = make(hw)
    num_prefix = gaug.num_prefix_tokens

    def grads(fn):
        q, k, v = (t.clone().requires_grad_() for t in qkv)
        gaug.zero_grad(set_to_none=True)
        torch.manual_seed(123)
        out = fn(q, k, v)
        out.pow(2).sum().backward()
        return [out.detach(), q.grad, k.grad, v.grad
                ] + [p.grad.clone() for p in gaug.parameters()]

    def reference(q, k, v):
        bias = gaug(q, hw)
        outs = [
            F.scaled_dot_product_attention(
                q[:, :, s:e],
                k,
                v,
                attn_mask=bias[:, :, s:e] if s >= num_prefix else None,
                dropout_p=p_drop)
            for s, e in query_blocks(q.shape[2], num_prefix, 4)
        ]
        return torch.cat(outs, dim=2)

    got = grads(lambda q, k, v: chunked(
        gaug, q, k, v, hw, dropout_p=p_drop, block_size=4))
    ref = grads(reference)
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    # Dropout did act: the output differs from the no-dropout one.
    with torch.no_grad():
        assert not torch.allclose(got[0], dense(gaug, *qkv, hw), atol=1e-3)


def test_saves_no_quadratic_tensor_for_backward():
    """Training memory is O(N) per head between forward and backward: no
    tensor with N^2 elements per (batch, head) is kept, as the dense bias
    is."""
    hw = (16, 16)
    gaug, qkv = make(hw, num_prefix=1, batch=1, heads=2)
    n = 1 + 256
    q, k, v = (t.clone().requires_grad_() for t in qkv)
    sizes = []

    def pack(t):
        sizes.append(t.numel())
        return t

    for fn, bound in ((chunked, 2 * n * 16), (dense, None)):
        sizes.clear()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            fn(gaug, q, k, v, hw).sum()
        if bound is None:  # the dense reference keeps the full bias
            assert max(sizes) >= 2 * (n - 1)**2
        else:  # (B, heads, N, d) inputs/outputs, (B, heads, N) stats
            assert max(sizes) <= bound


def test_bad_inputs_raise():
    hw = (5, 7)
    gaug, (q, k, v) = make(hw)
    var, alpha = gaug(q, hw, return_factors=True)
    fn = functools.partial(gaug.axis_gauss, hw=hw)
    with pytest.raises(ValueError, match='do not fit'):
        chunked_gaug_attention(q, k, v, var[:, :, 1:], alpha, fn, 2)
    with pytest.raises(ValueError, match='do not fit'):
        chunked_gaug_attention(q, k, v, var, alpha, fn, 3)
    with pytest.raises(ValueError, match='do not fit'):
        chunked_gaug_attention(q, k, v, var, alpha[..., :0], fn, 2)
    assert math.isfinite(chunked(gaug, q, k, v, hw).sum().item())


def test_double_backward_raises():
    """The recomputing backward is not itself differentiable: asking for a
    second derivative is a clear error, not a silently wrong gradient."""
    gaug, (q, k, v) = make()
    q.requires_grad_()
    out = chunked(gaug, q, k, v, (5, 7))
    (grad_q, ) = torch.autograd.grad(out.pow(2).sum(), q, create_graph=True)
    assert torch.isfinite(grad_q).all() and grad_q.abs().sum() > 0
    with pytest.raises(RuntimeError, match='differentiate twice'):
        grad_q.sum().backward()
