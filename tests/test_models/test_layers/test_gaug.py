"""GAug against a naive reference written from
``docs/method.md#gaug-gaussian-locality-bias``."""
import math

import pytest
import torch
import torch.nn.functional as F

from mmlocat.models.layers.gaug import (GaussianAugment, gaug_attention,
                                        gaug_clamp_value, gaug_eps)


def spec_eps(grid):
    eps = 0.1
    while 0.5 * (max(grid) - 1)**2 / eps**2 > 32500:
        eps *= 2
    return eps


def naive_bias(q,
               w_var,
               b_var,
               w_alpha,
               b_alpha,
               train_grid,
               hw,
               num_prefix,
               clamp,
               z_var=None,
               z_alpha=None):
    """S from docs/method.md, one query patch at a time, in float64."""
    q = q.double()
    h0, w0 = train_grid
    h, w = hw
    c = max(h0, w0)**2
    eps = spec_eps(train_grid)
    floor = max(-0.5 * (max(h0, w0) - 1)**2, -6550.)
    batch, heads, n, _ = q.shape
    assert n == num_prefix + h * w
    s = torch.zeros(batch, heads, n, n, dtype=torch.float64)
    if z_var is None:
        z_var = q @ w_var.double().T + b_var.double()
        z_alpha = q @ w_alpha.double().T + b_alpha.double()
    for p in range(h * w):
        rp, cp = divmod(p, w)
        var = c * torch.sigmoid(z_var[:, :, num_prefix + p].double() -
                                math.log(c - 1))  # (B, heads, 2)
        if (h, w) != (h0, w0):
            var = var * (min(h, w) / min(h0, w0))
        alpha = F.softplus(z_alpha[:, :, num_prefix + p].double())
        for t in range(h * w):
            rt, ct = divmod(t, w)
            d_row = -0.5 * (rp - rt)**2
            d_col = -0.5 * (cp - ct)**2
            if clamp:
                d_row, d_col = max(d_row, floor), max(d_col, floor)
            expo = d_row / (var[..., 0] + eps) + d_col / (var[..., 1] + eps)
            s[:, :, num_prefix + p, num_prefix + t] = (
                alpha[..., 0] * torch.exp(expo))
    return s


def random_gaug(head_dims, grid, num_prefix, clamp=True, seed=0):
    torch.manual_seed(seed)
    gaug = GaussianAugment(head_dims, grid, num_prefix, clamp=clamp)
    with torch.no_grad():  # far from init so every term matters
        for p in gaug.parameters():
            p.normal_(0, 0.3)
    return gaug


def reference_for(gaug, q, hw, **kwargs):
    return naive_bias(q, gaug.log_var.weight, gaug.log_var.bias,
                      gaug.log_alpha.weight, gaug.log_alpha.bias,
                      gaug.grid_size, hw, gaug.num_prefix_tokens, gaug.clamp,
                      **kwargs)


@pytest.mark.parametrize('train_grid,hw,num_prefix,clamp', [
    ((3, 4), (3, 4), 1, True),
    ((3, 4), (3, 4), 5, False),
    ((4, 3), (4, 3), 0, True),
    ((3, 3), (6, 8), 1, True),
    ((3, 3), (6, 8), 1, False),
    ((3, 4), (2, 7), 5, True),
])
def test_bias_matches_naive_reference(train_grid, hw, num_prefix, clamp):
    gaug = random_gaug(8, train_grid, num_prefix, clamp)
    q = torch.randn(2, 3, num_prefix + hw[0] * hw[1], 8)
    out = gaug(q, hw)
    ref = reference_for(gaug, q, hw)
    assert out.shape == ref.shape and out.dtype == torch.float32
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-6)
    # Prefix rows and columns are exactly zero.
    assert torch.count_nonzero(out[:, :, :num_prefix]) == 0
    assert torch.count_nonzero(out[:, :, :, :num_prefix]) == 0
    assert (out[:, :, num_prefix:, num_prefix:] > 0).all()


def test_clamp_matters_only_beyond_training_grid():
    q_small = torch.randn(1, 2, 1 + 9, 8)
    q_big = torch.randn(1, 2, 1 + 6 * 8, 8)
    on = random_gaug(8, (3, 3), 1, clamp=True)
    off = random_gaug(8, (3, 3), 1, clamp=False)
    torch.testing.assert_close(on(q_small, (3, 3)), off(q_small, (3, 3)))
    assert not torch.allclose(on(q_big, (6, 8)), off(q_big, (6, 8)))
    # Switchable at run time (visualisation): same module, clamp off.
    on.clamp = False
    torch.testing.assert_close(on(q_big, (6, 8)), off(q_big, (6, 8)))


def test_constants_from_training_grid():
    assert gaug_eps((14, 14)) == pytest.approx(0.1)
    for grid in [(14, 14), (32, 32), (64, 48), (100, 7), (300, 300)]:
        assert gaug_eps(grid) == pytest.approx(spec_eps(grid))
    assert gaug_eps((64, 64)) == pytest.approx(0.4)
    assert gaug_clamp_value((14, 14)) == -84.5
    assert gaug_clamp_value((300, 300)) == -6550.
    gaug = GaussianAugment(64, (14, 14), 1)
    assert gaug.cap == 196 and gaug.eps == pytest.approx(0.1)
    # c <= 2 (a 1x1 grid): no shift, as in the public code.
    assert GaussianAugment(8, (1, 1), 1).shift == 0


def test_f0_is_one_and_init_values():
    gaug = GaussianAugment(64, (14, 14), 1)
    q = torch.randn(2, 3, 1 + 196, 64)
    with torch.no_grad():
        var, alpha = gaug.variance_and_alpha(q[:, :, 1:], (14, 14))
        assert var.shape == (2, 3, 196, 2) and alpha.shape == (2, 3, 196, 1)
        # Default init: trunc-normal 0.02 weights, zero bias.
        assert gaug.log_var.bias.abs().max() == 0
        assert 0.005 < gaug.log_var.weight.std() < 0.03
        assert abs(var.mean().item() - 1) < 0.05
        assert abs(alpha.mean().item() - math.log(2)) < 0.02
        # f(0) = 1 exactly-ish, alpha(0) = ln 2.
        for p in gaug.parameters():
            p.zero_()
        var, alpha = gaug.variance_and_alpha(q[:, :, 1:], (14, 14))
        torch.testing.assert_close(var, torch.ones_like(var))
        torch.testing.assert_close(alpha, torch.full_like(alpha, math.log(2)))
        # A 28x42 grid doubles the variance: min(28, 42) / min(14, 14).
        q_big = torch.randn(1, 3, 28 * 42, 64)
        var, _ = gaug.variance_and_alpha(q_big, (28, 42))
        torch.testing.assert_close(var, torch.full_like(var, 2.))
        # The diagonal of S is alpha * exp(0).
        s = gaug(q, (14, 14))
        diag = torch.diagonal(s[:, :, 1:, 1:], dim1=-2, dim2=-1)
        torch.testing.assert_close(diag, torch.full_like(diag, math.log(2)))


def test_float32_math_under_bf16_autocast():
    gaug = random_gaug(8, (3, 4), 1)
    hw = (5, 6)
    q = torch.randn(2, 2, 1 + 30, 8)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        z_var = gaug.log_var(q)
        z_alpha = gaug.log_alpha(q)
        var, alpha = gaug.variance_and_alpha(q[:, :, 1:], hw)
        out = gaug(q, hw)
        out_bf16 = gaug(q.bfloat16(), hw)
    assert z_var.dtype == torch.bfloat16  # the linears do run in bf16
    assert var.dtype == alpha.dtype == torch.float32
    assert out.dtype == torch.float32 and out_bf16.dtype == torch.bfloat16
    # Everything after the linears is float32: matches a float64 reference
    # fed with the same bf16 linear outputs far tighter than bf16 math.
    ref = reference_for(gaug, q, hw, z_var=z_var, z_alpha=z_alpha)
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out_bf16.double(), ref, rtol=1e-2, atol=1e-2)


def test_gradients_and_inference_mode_cache():
    gaug = random_gaug(8, (3, 3), 1)
    hw = (17, 3)  # an unusual size, so the cache is filled here
    q = torch.randn(1, 2, 1 + 51, 8)
    with torch.inference_mode():
        gaug(q, hw)
    q = q.clone().requires_grad_()
    gaug(q, hw).sum().backward()  # a cached inference tensor would fail
    assert q.grad.abs().sum() > 0
    for p in gaug.parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0


def test_gaug_attention_adds_bias_to_scaled_logits():
    gaug = random_gaug(8, (3, 4), 1)
    q, k, v = torch.randn(3, 2, 2, 13, 8).unbind(0)
    out = gaug_attention(q, k, v, gaug, (3, 4))
    logits = q @ k.transpose(-2, -1) / math.sqrt(8) + gaug(q, (3, 4))
    torch.testing.assert_close(out, logits.softmax(-1) @ v)
    plain = gaug_attention(q, k, v, None, (3, 4))
    torch.testing.assert_close(
        plain, (q @ k.transpose(-2, -1) / math.sqrt(8)).softmax(-1) @ v)


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match='grid_size'):
        GaussianAugment(8, (0, 3))
    with pytest.raises(ValueError, match='num_prefix_tokens'):
        GaussianAugment(8, (3, 3), num_prefix_tokens=-1)
    gaug = GaussianAugment(8, (3, 3), 1)
    with pytest.raises(ValueError, match='tokens'):
        gaug(torch.randn(1, 2, 12, 8), (3, 3))  # 1 + 9 != 12
    with pytest.raises(ValueError, match='shape'):
        gaug(torch.randn(1, 2, 10, 4), (3, 3))
    with pytest.raises(ValueError, match='shape'):
        gaug(torch.randn(2, 10, 8), (3, 3))


def test_axis_terms_made_under_fake_tensor_mode_are_not_cached():
    """FLOP counting (tools/analysis_tools/get_flops.py) runs the model
    under ``FakeTensorMode``: the cached ``-1/2 (i - j)^2`` terms were then
    value-less placeholders that every later real forward of that grid
    read (LocAtViT parity off by 0.06, ONNX export failing on
    ``aten.equal``)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from mmlocat.models.layers.gaug import bias
    length, clamp = 13, -3.25  # a key no other test uses
    with FakeTensorMode(allow_non_fake_inputs=True):
        bias._axis_terms(length, clamp, torch.device('cpu'))
    terms = bias._axis_terms(length, clamp, torch.device('cpu'))
    assert type(terms) is torch.Tensor
    idx = torch.arange(length, dtype=torch.float32)
    expected = (-0.5 * (idx[:, None] - idx[None, :])**2).clamp(min=clamp)
    torch.testing.assert_close(terms, expected, rtol=0, atol=0)
