"""FlexAttention GAug kernel: limits on CPU and clear errors (its
exactness against the dense bias is in test_gaug_kernels.py)."""
import pytest
import torch

from mmlocat.models.layers import GaussianAugment, flex_gaug_attention
from mmlocat.models.layers.gaug_flex import flex_available


def setup(requires_grad=False):
    torch.manual_seed(0)
    gaug = GaussianAugment(8, (3, 4), 1)
    q, k, v = torch.randn(3, 1, 2, 13, 8).unbind(0)
    q.requires_grad_(requires_grad)
    var, alpha = gaug(q, (3, 4), return_factors=True)
    return gaug, q, k, v, var, alpha


def test_no_backward_on_cpu():
    gaug, q, k, v, var, alpha = setup(requires_grad=True)
    with pytest.raises(NotImplementedError, match="gaug_impl='chunked'"):
        flex_gaug_attention(
            q,
            k,
            v,
            var,
            alpha, (3, 4),
            gaug.eps,
            gaug.clamp_value(),
            1,
            compiled=False)


def test_shape_mismatch_raises():
    gaug, q, k, v, var, alpha = setup()
    with torch.no_grad(), pytest.raises(ValueError, match='does not fit'):
        flex_gaug_attention(
            q, k, v, var, alpha, (4, 4), gaug.eps, None, 1, compiled=False)


def test_available_on_cpu():
    assert flex_available(torch.device('cpu'))
