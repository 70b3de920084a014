"""LocAtViT on the extreme inputs of the bad-input drill: a single patch
(16x16) and a one-row strip (16x1024, and its transpose), with and without
register tokens, through every GAug kernel that runs on this machine.

Every kernel must give the dense reference's output (and, where it trains,
its gradients) to float32 round-off; the grid is 1x1, 1x64 or 64x1, far
from the training grid, so GAug's variance rescale and clamp are active.
FlexAttention runs compiled in inference on CPU (one compile per token
count, tens of seconds each); its CUDA (Triton) build and its training
path cannot run here (no GPU; no CPU backward, an error by design).
"""
import pytest
import torch
from helpers.tiny_archs import TINY_VIT

import mmlocat  # noqa: F401
from mmlocat.models.backbones import LocAtViT

TOL = dict(atol=2e-5, rtol=1e-5)
SIZES = [(16, 16), (16, 1024), (1024, 16)]


def _model(impl: str, regs: int, pooling: str, out_type: str) -> LocAtViT:
    torch.manual_seed(0)
    return LocAtViT(
        arch=TINY_VIT,
        img_size=224,  # training grid 14x14
        patch_size=16,
        num_register_tokens=regs,
        pooling=pooling,
        out_type=out_type,
        gaug_cfg=dict(impl=impl))


def _assert_close_to_max(got: torch.Tensor, want: torch.Tensor) -> None:
    """float32 round-off relative to the tensor's largest magnitude (the
    CLS token's gradient reaches hundreds: elementwise rtol is too tight
    for its small entries), with an absolute floor for gradients that are
    zero in exact arithmetic (GAug's bias when a query sees one key)."""
    err = (got - want).abs().max().item()
    assert err <= 1e-4 * want.abs().max().item() + 1e-5, err


def _grads(model: LocAtViT, x: torch.Tensor) -> dict:
    model.train()
    model.zero_grad()
    model(x)[0].square().sum().backward()
    return {
        n: p.grad.clone()
        for n, p in model.named_parameters() if p.grad is not None
    }


@pytest.mark.parametrize('size', SIZES)
@pytest.mark.parametrize('regs', [0, 4])
@pytest.mark.parametrize('pooling,out_type', [('cls', 'cls_token'),
                                              ('gap', 'featmap')])
def test_kernels_agree_on_extreme_grids(size, regs, pooling, out_type):
    x = torch.randn(2, 3, *size)
    grid = (size[0] // 16, size[1] // 16)
    dense = _model('dense', regs, pooling, out_type).eval()
    with torch.no_grad():
        want = dense(x)[0]
    shape = (2, 32) if out_type == 'cls_token' else (2, 32) + grid
    assert want.shape == shape and torch.isfinite(want).all()
    want_grads = _grads(dense, x)
    assert all(torch.isfinite(g).all() for g in want_grads.values())
    for impl in ('chunked', 'auto'):
        model = _model(impl, regs, pooling, out_type).eval()
        with torch.no_grad():
            torch.testing.assert_close(model(x)[0], want, **TOL)
        got = _grads(model, x)
        assert got.keys() == want_grads.keys()
        for name, grad in got.items():
            _assert_close_to_max(grad, want_grads[name])


@pytest.mark.timeout(600)
@pytest.mark.parametrize('size', [(16, 16), (16, 1024)])
@pytest.mark.slow
def test_compiled_flex_on_extreme_grids(size):
    """Two compiles (1 CLS + 4 registers + 1 or 64 patches)."""
    from mmlocat.models.layers.gaug.flex import flex_compile_stats
    x = torch.randn(2, 3, *size)
    with torch.no_grad():
        want = _model('dense', 4, 'cls', 'cls_token').eval()(x)[0]
        before = flex_compile_stats()
        got = _model('flex', 4, 'cls', 'cls_token').eval()(x)[0]
    after = flex_compile_stats()
    # really compiled (a failed compile would fall back to chunked)
    assert after['failed'] == before['failed']
    assert after['compiled'] >= 1
    torch.testing.assert_close(got, want, **TOL)
    model = _model('flex', 4, 'cls', 'cls_token').train()
    with pytest.raises(NotImplementedError, match='no backward pass on CPU'):
        model(x)[0].sum().backward()
