"""PRR against a naive per-head reference (``docs/method.md#prr``)."""
import math

import pytest
import torch

from mmlocat.models.layers.prr import PRR


def naive_prr(x, num_heads):
    batch, n, c = x.shape
    d = c // num_heads
    out = torch.empty_like(x, dtype=torch.float64)
    for b in range(batch):
        for h in range(num_heads):
            xh = x[b, :, h * d:(h + 1) * d].double()  # contiguous chunk
            attn = torch.softmax(xh @ xh.T / math.sqrt(d), dim=-1)
            out[b, :, h * d:(h + 1) * d] = attn @ xh
    return out


@pytest.mark.parametrize('num_heads,c', [(1, 8), (3, 12), (4, 32)])
def test_prr_matches_naive(num_heads, c):
    x = torch.randn(2, 7, c)
    prr = PRR(num_heads)
    out = prr(x)
    assert out.shape == x.shape
    torch.testing.assert_close(
        out.double(), naive_prr(x, num_heads), rtol=1e-5, atol=1e-6)
    assert not torch.allclose(out, x)


def test_prr_is_parameter_free_and_checks_input():
    prr = PRR(3)
    assert sum(p.numel() for p in prr.parameters()) == 0
    assert len(list(prr.buffers())) == 0
    with pytest.raises(ValueError, match='divisible'):
        prr(torch.randn(1, 4, 10))
    with pytest.raises(ValueError, match='B, N, C'):
        prr(torch.randn(4, 12))
    with pytest.raises(ValueError):
        PRR(0)
