"""GAug's public-code options: ``precision='public'`` (fp16 arithmetic under
fp16 AMP) and the opt-in fast GAug, each against a transcription of the
public code's rule (sinahmr/LocAtViT ``models/locat.py``, as
``docs/method.md#gaug-gaussian-locality-bias`` and issue 17 describe it),
written here in the public code's shape: a full
(H*W)^2 x 2 offset table, ``(d / (var + eps)).sum(-1)``, ``exp``.

CPU autocast supports float16 in this torch, so the AMP case runs as on the
GPU (the public code's ``autocast(device_type='cuda', enabled=False)``
blocks never upcast: its inputs are already fp16). The reference is
computed on explicit half tensors.
"""
import math

import pytest
import torch
import torch.nn.functional as F

from mmlocat.models.backbones.locat_layers import GAugAttention
from mmlocat.models.layers.gaug import GaussianAugment


def public_offsets(grid, dtype, init_grid):
    """``-1/2 (i - j)^2`` per axis, (N, N, 2), clamped, in ``dtype``."""
    n0, n1 = grid
    idx = torch.stack(
        torch.meshgrid(torch.arange(n0), torch.arange(n1), indexing='ij'),
        dim=2).reshape(-1, 2)
    d = (idx[None, :, :] - idx[:, None, :])**2
    d = -0.5 * d.to(dtype)
    clamp = max(-0.5 * (max(init_grid) - 1)**2, -6550)
    d[d < clamp] = clamp
    return d


def public_eps(init_grid):
    eps = 1e-1
    while 0.5 * (max(init_grid) - 1)**2 / eps**2 > 65000 / 2:
        eps *= 2
    return eps


def public_var_alpha(z_var, z_alpha, grid, init_grid):
    coef = max(init_grid)**2
    var = coef * torch.special.expit(z_var - math.log(coef - 1))
    if tuple(grid) != tuple(init_grid):
        var = var * (min(grid) / min(init_grid))
    return var, F.softplus(z_alpha)


def public_bias(q_patch, log_var, log_alpha, grid, init_grid, prefix):
    """The public ``addition_2d`` on queries of any dtype, no upcast."""
    var, alpha = public_var_alpha(
        log_var(q_patch), log_alpha(q_patch), grid, init_grid)
    d = public_offsets(grid, var.dtype, init_grid)[None, None]
    gauss = torch.exp((d / (var.unsqueeze(3) + public_eps(init_grid))).sum(-1))
    return F.pad(alpha * gauss, (prefix, 0, prefix, 0))


def public_fast_bias(q_patch, log_var, log_alpha, grid, init_grid, prefix):
    """The public ``fast_addition_2d`` in training (rate 2)."""
    rate = 2
    b, heads, n, c = q_patch.shape
    q = q_patch.reshape(b, heads, grid[0] // rate, rate, grid[1] // rate, rate,
                        c).mean(dim=(3, 5))
    var, alpha = public_var_alpha(log_var(q), log_alpha(q), grid, init_grid)
    var, alpha = var[:, :, :, :, None, None], alpha[..., None]
    d = public_offsets(grid, var.dtype, init_grid).reshape(
        1, 1, *grid, *grid, 2)[..., ::rate, ::rate, ::rate, ::rate, :]
    gauss = torch.exp((d / (var + public_eps(init_grid))).sum(-1))
    addition = alpha * gauss
    for dim in range(-4, 0):
        addition = addition.repeat_interleave(rate, dim=dim)
    addition = addition.flatten(4, 5).flatten(2, 3)
    return F.pad(addition, (prefix, 0, prefix, 0))


def make(grid, precision='fp32', fast=False, prefix=1, d=16, seed=0):
    torch.manual_seed(seed)
    gaug = GaussianAugment(
        d, grid, num_prefix_tokens=prefix, precision=precision, fast=fast)
    with torch.no_grad():  # spread var / alpha over a useful range
        for layer in (gaug.log_var, gaug.log_alpha):
            layer.weight.normal_(std=0.3)
            layer.bias.normal_(std=1.)
    return gaug


def queries(grid, prefix=1, d=16, heads=2, seed=1, dtype=torch.float32):
    gen = torch.Generator().manual_seed(seed)
    n = prefix + grid[0] * grid[1]
    return (2 * torch.randn(2, heads, n, d, generator=gen)).to(dtype)


@pytest.mark.parametrize('grid,hw', [((14, 14), (14, 14)),
                                     ((14, 14), (20, 12))])
def test_public_precision_is_the_public_fp16_arithmetic(grid, hw):
    gaug = make(grid, 'public')
    q = queries(hw)
    with torch.autocast('cpu', dtype=torch.float16):
        # q as the qkv Linear gives it under AMP: fp16.
        ours = gaug(q.half(), hw)
    # Reference: the same fp16 Linear outputs, then fp16 all the way.
    half = make(grid, 'public').half()
    ref = public_bias(q.half()[:, :, 1:], half.log_var, half.log_alpha, hw,
                      grid, 1)
    assert ours.dtype == torch.float16
    assert torch.equal(ours, ref)
    # Explicit half tensors, no autocast: the same.
    assert torch.equal(half(q.half(), hw), ref)


def test_fp32_precision_upcasts_under_amp():
    """The default computes the fp16 Linear outputs on in float32: it
    equals the public rule in float32 (then cast), and differs from the
    public fp16 arithmetic."""
    grid = (14, 14)
    gaug = make(grid, 'fp32')
    q = queries(grid, dtype=torch.float16)
    with torch.autocast('cpu', dtype=torch.float16):
        ours = gaug(q, grid)
        z_var = gaug.log_var(q[:, :, 1:])
        z_alpha = gaug.log_alpha(q[:, :, 1:])
    assert ours.dtype == z_var.dtype == torch.float16

    class Fixed(torch.nn.Module):

        def __init__(self, z):
            super().__init__()
            self.z = z

        def forward(self, _):
            return self.z.float()

    ref32 = public_bias(q[:, :, 1:].float(), Fixed(z_var), Fixed(z_alpha),
                        grid, grid, 1)
    torch.testing.assert_close(
        ours.float(), ref32.half().float(), rtol=0, atol=0)
    half = make(grid, 'public').half()
    ref16 = public_bias(q.half()[:, :, 1:], half.log_var, half.log_alpha, grid,
                        grid, 1)
    assert not torch.equal(ours, ref16)
    torch.testing.assert_close(ours, ref16, rtol=1e-2, atol=1e-2)


def test_precisions_agree_in_float32():
    grid = (14, 14)
    q = queries(grid)
    torch.testing.assert_close(
        make(grid, 'public')(q, grid),
        make(grid, 'fp32')(q, grid))


def test_fast_gaug_is_the_public_rule_in_training():
    grid = (32, 32)
    gaug = make(grid, fast=True, prefix=1, d=8).train()
    q = queries(grid, d=8, heads=1)
    ref = public_fast_bias(q[:, :, 1:], gaug.log_var, gaug.log_alpha, grid,
                           grid, 1)
    ours = gaug(q, grid)
    torch.testing.assert_close(ours, ref, rtol=1e-6, atol=1e-6)
    exact = public_bias(q[:, :, 1:], gaug.log_var, gaug.log_alpha, grid, grid,
                        1)
    assert (ours - exact).abs().max() > 1e-2  # it is an approximation
    # Eval, or a training grid below 32 rows, or the option off: exact.
    gaug.eval()
    torch.testing.assert_close(gaug(q, grid), exact, rtol=1e-5, atol=1e-5)
    off = make(grid, fast=False, prefix=1, d=8).train()
    torch.testing.assert_close(off(q, grid), exact, rtol=1e-5, atol=1e-5)
    small = make((16, 16), fast=True, prefix=1, d=8).train()
    q16 = queries((16, 16), d=8, heads=1)
    torch.testing.assert_close(
        small(q16, (16, 16)),
        public_bias(q16[:, :, 1:], small.log_var, small.log_alpha, (16, 16),
                    (16, 16), 1),
        rtol=1e-5,
        atol=1e-5)


def test_fast_gaug_needs_an_even_grid():
    gaug = make((32, 32), fast=True, d=8).train()
    with pytest.raises(ValueError, match='even patch grid'):
        gaug(queries((33, 32), d=8), (33, 32))


def test_attention_runs_the_dense_kernel_for_public_options():
    """Both options are dense-only: 'auto' picks dense (the result equals
    an explicit dense run) and chunked / flex are refused up front."""
    torch.manual_seed(0)
    x = torch.randn(1, 1 + 32 * 32, 32)
    for cfg in (dict(precision='public'), dict(fast=True)):
        attn = GAugAttention(32, 2, (32, 32), gaug_cfg=cfg).train()
        dense = GAugAttention(
            32, 2, (32, 32), gaug_cfg=dict(cfg, impl='dense'))
        dense.load_state_dict(attn.state_dict())
        dense.train()
        torch.testing.assert_close(
            attn(x, (32, 32)), dense(x, (32, 32)), rtol=0, atol=0)
        for impl in ('chunked', 'flex'):
            with pytest.raises(ValueError, match='dense GAug kernel'):
                GAugAttention(32, 2, (32, 32), gaug_cfg=dict(cfg, impl=impl))
    with pytest.raises(ValueError, match='precision'):
        GaussianAugment(16, (14, 14), precision='fp16')


def test_locat_vit_threads_the_options_to_every_block():
    from mmlocat.models import LocAtViT
    model = LocAtViT(
        arch='t', img_size=64, gaug_cfg=dict(precision='public', fast=True))
    assert all(layer.attn.gaug.precision == 'public' and layer.attn.gaug.fast
               for layer in model.layers)
    default = LocAtViT(arch='t', img_size=64)
    assert all(layer.attn.gaug.precision == 'fp32' and not layer.attn.gaug.fast
               for layer in default.layers)
    with torch.autocast('cpu', dtype=torch.float16), torch.no_grad():
        out = model.eval()(torch.randn(1, 3, 64, 64))[0]
    assert torch.isfinite(out).all()
