"""Patch score s_i = cos(x_i, q) (docs/method.md#patch-score)."""
import math

import pytest
import torch

from mmlocat.models.layers import patch_score


def naive_cos(tokens, q):
    out = torch.zeros(tokens.shape[:2])
    for b in range(tokens.shape[0]):
        for i in range(tokens.shape[1]):
            t = tokens[b, i].double()
            g = q[b].double()
            out[b, i] = float(t @ g) / math.sqrt(float(t @ t) * float(g @ g))
    return out


def test_matches_cosine_reference():
    tokens = torch.randn(2, 6, 9)
    q = torch.randn(2, 9)
    s = patch_score(tokens, q)
    assert s.shape == (2, 6) and s.dtype == torch.float32
    torch.testing.assert_close(s, naive_cos(tokens, q), atol=1e-6, rtol=0)
    assert bool((s.abs() <= 1 + 1e-6).all())


def test_scale_invariance_and_self_similarity():
    tokens = torch.randn(1, 4, 5)
    s = patch_score(tokens * 7.0, tokens[:, 2] * 0.1)
    assert abs(float(s[0, 2]) - 1.0) < 1e-6
    s2 = patch_score(tokens, -tokens[:, 1])
    assert abs(float(s2[0, 1]) + 1.0) < 1e-6


def test_zero_tokens_score_zero_not_nan():
    tokens = torch.randn(2, 5, 8)
    tokens[0, 3] = 0
    s = patch_score(tokens, torch.randn(2, 8))
    assert float(s[0, 3]) == 0.0 and not bool(s.isnan().any())
    s = patch_score(tokens, torch.zeros(2, 8))
    assert torch.equal(s, torch.zeros(2, 5))


def test_half_precision_does_not_overflow():
    # squared norm 768 * 300^2 exceeds the fp16 range
    tokens = torch.full((1, 3, 768), 300.0, dtype=torch.float16)
    s = patch_score(tokens, torch.full((1, 768), 300.0, dtype=torch.float16))
    assert s.dtype == torch.float32
    torch.testing.assert_close(s, torch.ones(1, 3), atol=1e-3, rtol=0)


def test_bf16_scores_are_float32_so_ties_do_not_decide():
    # cos = 0.99228 and 0.99320 (patch 1 is the best): both round to
    # 0.9921875 in bf16, where argmax would return patch 0.
    tokens = torch.tensor([[[1., .125], [1., .1171875]]], dtype=torch.bfloat16)
    q = torch.tensor([[1., 0.]], dtype=torch.bfloat16)
    s = patch_score(tokens, q)
    assert s.dtype == torch.float32
    assert s[0, 0] < s[0, 1] and int(s.argmax()) == 1
    rounded = s.to(torch.bfloat16)
    assert rounded[0, 0] == rounded[0, 1]  # the tie that float32 avoids


def test_gradients_flow():
    tokens = torch.randn(1, 3, 4, requires_grad=True)
    q = torch.randn(1, 4, requires_grad=True)
    patch_score(tokens, q).sum().backward()
    assert tokens.grad is not None and q.grad is not None
    assert float(q.grad.abs().sum()) > 0


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match=r'\(B, N, D\)'):
        patch_score(torch.randn(3, 4), torch.randn(3, 4))
    with pytest.raises(ValueError, match=r'\(B, D\)'):
        patch_score(torch.randn(1, 3, 4), torch.randn(1, 1, 4))
    with pytest.raises(ValueError, match='disagree'):
        patch_score(torch.randn(2, 3, 4), torch.randn(2, 5))
    with pytest.raises(ValueError, match='disagree'):
        patch_score(torch.randn(2, 3, 4), torch.randn(1, 4))
    bad = torch.randn(1, 3, 4)
    bad[0, 0, 0] = float('nan')
    with pytest.raises(ValueError, match='NaN'):
        patch_score(bad, torch.randn(1, 4), check_finite=True)
