"""Every GAug kernel against the dense reference: forward and gradients."""
import functools

import pytest
import torch
from _gaug_inputs import random_gaug, random_qkv
from helpers.tiny_archs import TINY_VIT, tiny_vit

import mmlocat.models.layers.gaug.dispatch as dispatch
from mmlocat.models.backbones import LocAtViT
from mmlocat.models.layers import (GAUG_IMPLS, chunked_gaug_attention,
                                   flex_gaug_attention, gaug_attention,
                                   resolve_gaug_impl)

# float32 round-off of outputs and gradients of O(1) magnitude.
TOL = dict(atol=1e-5, rtol=1e-5)

# (training grid, actual grid, prefix tokens, clamp): CLS only, CLS + 4
# registers, no prefix (GAP), non-square grids, grids larger than the
# training grid (variance rescale, clamp active) with the clamp on and off.
CASES = [
    ((3, 4), (3, 4), 1, True),
    ((3, 4), (3, 4), 5, True),
    ((4, 3), (4, 3), 0, True),
    ((3, 3), (6, 8), 1, True),
    ((3, 3), (6, 8), 5, False),
    ((3, 4), (7, 2), 2, True),
]


def run(attend, gaug, qkv, hw):
    """Output and gradients w.r.t. q, k, v and the GAug parameters."""
    q, k, v = (t.clone().requires_grad_() for t in qkv)
    gaug.zero_grad(set_to_none=True)
    out = attend(q, k, v, gaug, hw)
    # A non-uniform upstream gradient, so no term cancels.
    weight = torch.linspace(-1, 1, out.numel()).view_as(out)
    (out * weight).sum().backward()
    return [out.detach(), q.grad, k.grad, v.grad
            ] + [p.grad.clone() for p in gaug.parameters()]


def with_impl(impl):
    return functools.partial(gaug_attention, impl=impl)


def tiny_blocks(q, k, v, gaug, hw):
    """The chunked kernel cut into many small blocks (3 query patches, one
    head and one batch item per block)."""
    var, alpha = gaug(q, hw, return_factors=True)
    return chunked_gaug_attention(
        q,
        k,
        v,
        var,
        alpha,
        functools.partial(gaug.axis_gauss, hw=hw),
        gaug.num_prefix_tokens,
        block_elements=1,
        block_size=3)


def assert_all_close(got, ref, **tol):
    names = [
        'out', 'dq', 'dk', 'dv', 'dvar.w', 'dvar.b', 'dalpha.w', 'dalpha.b'
    ]
    for name, a, b in zip(names, got, ref):
        assert b.abs().max() > 0, name  # the test has something to compare
        torch.testing.assert_close(a, b, msg=name, **tol)


@pytest.mark.parametrize('train_grid,hw,num_prefix,clamp', CASES)
@pytest.mark.parametrize(
    'attend', [with_impl('chunked'), tiny_blocks],
    ids=['chunked', 'chunked-tiny-blocks'])
def test_chunked_matches_dense(train_grid, hw, num_prefix, clamp, attend):
    gaug = random_gaug(train_grid, num_prefix, clamp)
    qkv = random_qkv(gaug, hw)
    ref = run(with_impl('dense'), gaug, qkv, hw)
    assert_all_close(run(attend, gaug, qkv, hw), ref, **TOL)


@pytest.mark.parametrize('train_grid,hw,num_prefix,clamp', CASES)
def test_flex_matches_dense_forward(train_grid, hw, num_prefix, clamp):
    # FlexAttention has no CPU backward; its eager mode runs the same
    # score_mod as the compiled kernel, without the tens of seconds of
    # compilation (the compiled kernel: see the report of issue 7).
    gaug = random_gaug(train_grid, num_prefix, clamp)
    q, k, v = random_qkv(gaug, hw)
    with torch.no_grad():
        ref = gaug_attention(q, k, v, gaug, hw, impl='dense')
        var, alpha = gaug(q, hw, return_factors=True)
        out = flex_gaug_attention(
            q,
            k,
            v,
            var,
            alpha,
            hw,
            gaug.eps,
            gaug.clamp_value(),
            num_prefix,
            compiled=False)
    torch.testing.assert_close(out, ref, **TOL)


def test_bf16_autocast():
    """Under bf16 autocast q, k, v come out of the projection in bf16 and
    both kernels get the same bf16 bias (the GAug math itself is float32).
    With gradients on, the dense reference runs SDPA's math path in bf16
    (probabilities rounded to bf16, bf16 backward), while the chunked kernel
    accumulates in float32 (flash kernel forward; float32 backward from
    exactly upcast inputs). So results differ by a few bf16 roundings, not
    by float32 round-off: bf16 keeps 8 significant bits, a relative step of
    2^-8 = 0.0039, hence the bound of 4 steps (1.6%) of the largest entry.
    Without gradients both run the same kernel and agree to float32
    round-off."""
    gaug = random_gaug((3, 3), 2, True)
    hw, heads, dims = (5, 7), 3, 8
    n = 2 + 35
    torch.manual_seed(3)
    x = torch.randn(2, n, 24)
    qkv = torch.nn.Linear(24, 3 * heads * dims)

    def step(impl):
        inputs = x.clone().requires_grad_()
        gaug.zero_grad(set_to_none=True)
        qkv.zero_grad(set_to_none=True)
        with torch.autocast('cpu', dtype=torch.bfloat16):
            q, k, v = qkv(inputs).reshape(2, n, 3, heads,
                                          dims).permute(2, 0, 3, 1,
                                                        4).unbind(0)
            out = gaug_attention(q, k, v, gaug, hw, impl=impl)
        assert out.dtype == torch.bfloat16
        out.float().pow(2).sum().backward()
        return [out.float().detach(), inputs.grad, qkv.weight.grad
                ] + [p.grad for p in gaug.parameters()]

    ref, got = step('dense'), step('chunked')
    for a, b in zip(got, ref):
        scale = b.abs().max()
        assert scale > 0
        assert (a - b).abs().max() <= 4 * 2**-8 * scale
    with torch.no_grad(), torch.autocast('cpu', dtype=torch.bfloat16):
        q, k, v = qkv(x).reshape(2, n, 3, heads, dims).permute(2, 0, 3, 1,
                                                               4).unbind(0)
        outs = [
            gaug_attention(q, k, v, gaug, hw, impl=impl).float()
            for impl in ('dense', 'chunked')
        ]
    torch.testing.assert_close(outs[1], outs[0], **TOL)


@pytest.mark.parametrize('regs,size', [(0, (48, 80)), (2, (80, 48))])
def test_locatvit_equal_across_impls(monkeypatch, regs, size):
    monkeypatch.setattr(dispatch, 'flex_gaug_attention',
                        functools.partial(flex_gaug_attention, compiled=False))
    arch = TINY_VIT
    torch.manual_seed(0)
    models = {}
    for impl in GAUG_IMPLS:
        torch.manual_seed(0)
        models[impl] = LocAtViT(
            arch,
            img_size=32,
            num_register_tokens=regs,
            out_type='cls_token',
            gaug_cfg=dict(impl=impl))
        models[impl].init_weights()
        assert models[impl].layers[1].attn.gaug_impl == impl
    state = models['dense'].state_dict()
    with torch.no_grad():  # far from init so GAug matters
        for key in state:
            if 'gaug' in key:
                state[key].normal_(0, 0.3)
    x = torch.randn(2, 3, *size)
    outs = {}
    for impl, model in models.items():
        model.load_state_dict(state)
        model.eval()
        with torch.no_grad():
            outs[impl] = model(x)[0]
    for impl in GAUG_IMPLS:
        torch.testing.assert_close(outs[impl], outs['dense'], **TOL)
    # A train step: every parameter's gradient matches to float32 round-off
    # of its largest entry (some are O(50) here).
    grads = {}
    for impl in ('dense', 'chunked', 'auto'):
        model = models[impl].train()
        model.zero_grad()
        model(x)[0].pow(2).sum().backward()
        grads[impl] = {n: p.grad for n, p in model.named_parameters()}
    for impl in ('chunked', 'auto'):
        for name, grad in grads['dense'].items():
            scale = max(1., grad.abs().max().item())
            error = (grads[impl][name] - grad).abs().max().item()
            assert error <= 1e-5 * scale, (name, error, scale)


def test_resolve_gaug_impl():
    q = torch.zeros(1, 3, 1 + 196, 64)
    big = torch.zeros(1, 3, 1 + 64 * 64, 64)
    for needs_grad in (False, True):
        # CPU: the chunked kernel is the fastest exact one measured, at
        # every size, in inference and training.
        assert resolve_gaug_impl('auto', q, needs_grad) == 'chunked'
        assert resolve_gaug_impl('auto', big, needs_grad) == 'chunked'
        for impl in ('dense', 'chunked'):
            assert resolve_gaug_impl(impl, q, needs_grad) == impl
    assert resolve_gaug_impl('flex', q, False) == 'flex'
    with pytest.raises(NotImplementedError, match='no backward pass on CPU'):
        resolve_gaug_impl('flex', q, True)
    with pytest.raises(ValueError, match=r'dict\(impl=\.\.\.\) must be one'):
        resolve_gaug_impl('fast', q, False)
    with pytest.raises(ValueError, match='dropout'):
        resolve_gaug_impl('flex', q, True, attn_drop_p=0.1)
    with pytest.raises(ValueError, match=r'dict\(impl=\.\.\.\) must be one'):
        LocAtViT(
            tiny_vit(num_layers=1), img_size=32, gaug_cfg=dict(impl='sparse'))


@pytest.mark.parametrize('impl', ['dense', 'chunked', 'auto'])
def test_forward_hooks_see_every_impl(impl):
    """GAugStatsHook relies on a module call with (q, hw) per attention."""
    gaug = random_gaug((3, 4), 1, True)
    q, k, v = random_qkv(gaug, (3, 4))
    seen = []
    gaug.register_forward_hook(lambda module, args, out: seen.append(
        (args[0], tuple(args[1]))))
    gaug_attention(q, k, v, gaug, (3, 4), impl=impl)
    assert len(seen) == 1 and seen[0][0] is q and seen[0][1] == (3, 4)


def test_factor_tables_flush_subnormals():
    """Tiny factors are exactly 0 (no float32 subnormals, which are ~100x
    slower), and every kept factor is exact."""
    gaug = random_gaug((14, 14), 1, False)
    hw = (40, 40)
    q = torch.randn(1, 2, 1 + 1600, 8)
    with torch.no_grad():
        var, alpha = gaug(q, hw, return_factors=True)
        rows, cols = gaug.axis_gauss(var, alpha, hw)
        idx = torch.arange(40, dtype=torch.float64)
        terms = -0.5 * (idx[:, None] - idx[None, :])**2
        row_of = torch.arange(40).repeat_interleave(40)
        ref = alpha.double() * torch.exp(terms[row_of] /
                                         (var[..., 0:1].double() + gaug.eps))
    tiny = 2.**-63
    for table in (rows, cols):
        assert ((table == 0) | (table >= tiny)).all()
    assert (rows == 0).any()  # the flush did happen
    kept = rows > 0
    # Relative error of exp(x) in float32 is ~|x| * 2^-24 from rounding x
    # itself; kept factors have |x| < 44 + log(alpha), so about 3e-6.
    torch.testing.assert_close(
        rows[kept].double(), ref[kept], rtol=1e-5, atol=0)
    assert (ref[~kept] < tiny).all()


def test_factor_tables_of_a_query_range():
    """The kernels build the tables block by block (``start``)."""
    gaug = random_gaug((3, 3), 1, True)
    hw = (6, 5)
    q = torch.randn(2, 3, 1 + 30, 8)
    with torch.no_grad():
        var, alpha = gaug(q, hw, return_factors=True)
        rows, cols = gaug.axis_gauss(var, alpha, hw)
        part = gaug.axis_gauss(var[:, :, 7:19], alpha[:, :, 7:19], hw, 7)
    torch.testing.assert_close(part[0], rows[:, :, 7:19], rtol=0, atol=0)
    torch.testing.assert_close(part[1], cols[:, :, 7:19], rtol=0, atol=0)
    assert rows.shape == (2, 3, 30, 6) and cols.shape == (2, 3, 30, 5)
