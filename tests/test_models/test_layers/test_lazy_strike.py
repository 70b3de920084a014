"""LazyStrike pooling against a loop-by-loop numpy reference.

Reference: docs/method.md#lazystrike — channel FFT low-pass with a Gaussian
window, stability score, per-channel top-K over patches, mean of the original
values.
"""
import numpy as np
import pytest
import torch

from mmlocat.models.layers import (LazyStrikeOutput, LazyStrikePool,
                                   channel_lowpass, lazy_strike_pool,
                                   lazy_strike_window, lowpass_as_matmul,
                                   lowpass_matrix)


def naive_window(d, window):
    if window == 'code':
        pos = np.arange(-d // 2 + 1, d // 2 + 1)  # public code positions
    else:
        pos = np.arange(d) - d // 2  # DC bin after fftshift
    assert len(pos) == d
    g = np.exp(-0.5 * (pos / np.sqrt(d))**2)
    return g / g.max()


def naive_lazy_strike(x, k, score='code', window='code', eps=1e-6):
    """Python loops over images, tokens and channels; float64 numpy."""
    x = np.asarray(x, dtype=np.float64)
    b_size, n, d = x.shape
    g = naive_window(d, window)
    pooled = np.zeros((b_size, d))
    votes = np.zeros((b_size, n))
    for b in range(b_size):
        x_hat = np.zeros((n, d))
        for i in range(n):
            spec = np.fft.fftshift(np.fft.fft(x[b, i]))
            x_hat[i] = np.fft.ifft(np.fft.ifftshift(spec * g)).real
        for j in range(d):
            scores = []
            for i in range(n):
                den = abs(x_hat[i, j] - x[b, i, j])
                if score == 'code':
                    num = x[b, i, j]
                    if den > 0:
                        scores.append(num / den)
                    else:  # defined limit: 0/0 -> 0, v/0 -> signed inf
                        scores.append(0.0 if num == 0 else np.sign(num) *
                                      np.inf)
                else:
                    scores.append(x_hat[i, j] / (den + eps))
            order = sorted(range(n), key=lambda i: -scores[i])[:k]
            pooled[b, j] = np.mean([x[b, i, j] for i in order])
            for i in order:
                votes[b, i] += 1
    return pooled, votes


@pytest.mark.parametrize('d', [7, 8, 12])
@pytest.mark.parametrize('window', ['code', 'centered'])
@pytest.mark.parametrize('score', ['code', 'paper'])
@pytest.mark.parametrize('k', [1, 3])
def test_matches_naive_reference(d, window, score, k):
    gen = torch.Generator().manual_seed(d * 100 + k)
    x = torch.randn(2, 9, d, generator=gen)
    out = lazy_strike_pool(x, topk=k, score=score, window=window)
    ref_pooled, ref_votes = naive_lazy_strike(x.numpy(), k, score, window)
    assert isinstance(out, LazyStrikeOutput)
    assert out.pooled.shape == (2, d) and out.votes.shape == (2, 9)
    np.testing.assert_allclose(out.pooled.numpy(), ref_pooled, atol=1e-6)
    np.testing.assert_array_equal(out.votes.numpy(), ref_votes)


def test_window_peak_position():
    # Even D: the public code's peak is one bin below the DC bin.
    assert int(lazy_strike_window(8, 'code').argmax()) == 3
    assert int(lazy_strike_window(8, 'centered').argmax()) == 4
    # Odd D: both are centred on the DC bin.
    assert int(lazy_strike_window(7, 'code').argmax()) == 3
    assert int(lazy_strike_window(7, 'centered').argmax()) == 3
    g = lazy_strike_window(768)
    assert g.shape == (768, ) and float(g.max()) == 1.0
    # the far tails underflow to float32 denormals; absolute check there
    np.testing.assert_allclose(
        g.numpy(), naive_window(768, 'code'), rtol=1e-5, atol=1e-12)


def test_windows_differ_for_even_d():
    x = torch.randn(1, 16, 8, generator=torch.Generator().manual_seed(0))
    a = lazy_strike_pool(x, topk=1, window='code')
    b = lazy_strike_pool(x, topk=1, window='centered')
    ra, _ = naive_lazy_strike(x.numpy(), 1, window='code')
    rb, _ = naive_lazy_strike(x.numpy(), 1, window='centered')
    assert not np.allclose(ra, rb)  # the option changes the result
    np.testing.assert_allclose(a.pooled.numpy(), ra, atol=1e-6)
    np.testing.assert_allclose(b.pooled.numpy(), rb, atol=1e-6)


@pytest.mark.parametrize('score', ['code', 'paper'])
def test_k_equal_n_is_mean_pooling(score):
    x = torch.randn(3, 11, 10)
    out = lazy_strike_pool(x, topk=11, score=score)
    torch.testing.assert_close(out.pooled, x.mean(1), atol=1e-6, rtol=1e-6)
    assert torch.equal(out.votes, torch.full((3, 11), 10.))
    # topk above N is clamped to N
    big = lazy_strike_pool(x, topk=50, score=score)
    torch.testing.assert_close(big.pooled, x.mean(1), atol=1e-6, rtol=1e-6)
    ratio = lazy_strike_pool(x, topk=None, topk_ratio=1.0, score=score)
    torch.testing.assert_close(ratio.pooled, x.mean(1), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize('n,ratio,k', [(10, 0.5, 5), (10, 0.01, 1),
                                       (196, 0.5, 98), (49, 1 / 7, 7)])
def test_topk_ratio(n, ratio, k):
    x = torch.randn(2, n, 6)
    by_ratio = lazy_strike_pool(x, topk_ratio=ratio)
    by_k = lazy_strike_pool(x, topk=k)
    torch.testing.assert_close(by_ratio.pooled, by_k.pooled)
    assert torch.equal(by_ratio.votes, by_k.votes)
    assert torch.equal(by_ratio.votes.sum(1), torch.full((2, ), k * 6.))


@pytest.mark.parametrize('k', [1, 4])
@pytest.mark.parametrize('d', [5, 16])
def test_votes_sum_to_k_times_d(k, d):
    out = lazy_strike_pool(torch.randn(4, 9, d), topk=k)
    assert out.votes.dtype == torch.float32
    assert torch.equal(out.votes.sum(1), torch.full((4, ), float(k * d)))
    assert bool((out.votes >= 0).all()) and bool((out.votes <= d).all())


@pytest.mark.parametrize('score', ['code', 'paper'])
@pytest.mark.parametrize('window', ['code', 'centered'])
@pytest.mark.parametrize('k', [1, 3])
def test_zero_and_constant_tokens_give_no_nan(score, window, k):
    zeros = torch.zeros(2, 5, 8)
    const = torch.full((2, 5, 8), 3.5)
    # a token that is constant over channels has x_hat - x == 0 off the
    # window's DC bin only approximately; an all-zero one exactly
    mixed = torch.cat([zeros[:, :2], torch.randn(2, 3, 8)], dim=1)
    for x in (zeros, const, mixed):
        out = lazy_strike_pool(x, topk=k, score=score, window=window)
        assert not bool(out.pooled.isnan().any())
        assert not bool(out.votes.isnan().any())
        assert torch.equal(out.votes.sum(1), torch.full((2, ), k * 8.))
    torch.testing.assert_close(
        lazy_strike_pool(zeros, topk=k, score=score).pooled, torch.zeros(2, 8))
    torch.testing.assert_close(
        lazy_strike_pool(const, topk=k, score=score).pooled,
        torch.full((2, 8), 3.5))


def test_code_score_zero_denominator_is_defined():
    # Channel 0 of patch 0 equals its low-passed value exactly (all-zero
    # token), patch 1 is positive: the positive finite score must win over
    # the 0/0 entry, and nothing is NaN.
    x = torch.zeros(1, 2, 4)
    x[0, 1] = torch.tensor([1., 2., 3., 4.])
    out = lazy_strike_pool(x, topk=1)
    assert torch.equal(out.votes, torch.tensor([[0., 4.]]))
    torch.testing.assert_close(out.pooled, x[:, 1])


@pytest.mark.parametrize('k', [1, 3])
def test_gradient_only_into_gathered_entries(k):
    x = torch.randn(2, 7, 10, requires_grad=True)
    out = lazy_strike_pool(x, topk=k)
    assert out.pooled.requires_grad and not out.votes.requires_grad
    weights = torch.randn(2, 10)
    (out.pooled * weights).sum().backward()
    grad = x.grad
    picked = grad != 0
    # K patches per channel, each with d pooled / d x = weight / K
    assert torch.equal(picked.sum(1), torch.full((2, 10), k))
    torch.testing.assert_close(grad.sum(1), weights)
    # the gathered entries are exactly the voted ones
    assert torch.equal(picked.sum(2).float(), out.votes)


@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16])
def test_half_precision_input(dtype):
    x = (torch.randn(2, 12, 768) * 2).to(dtype)  # fp16 FFT cannot do 768
    out = lazy_strike_pool(x, topk=2)
    assert out.pooled.dtype == dtype and out.votes.dtype == torch.float32
    ref = lazy_strike_pool(x.float(), topk=2)
    torch.testing.assert_close(out.pooled, ref.pooled.to(dtype))
    assert torch.equal(out.votes, ref.votes)
    assert torch.equal(out.votes.sum(1), torch.full((2, ), 2 * 768.))


def test_module_matches_function_and_has_no_parameters():
    x = torch.randn(2, 9, 12)
    module = LazyStrikePool(topk=3, score='paper', window='centered')
    assert len(list(module.parameters())) == 0
    assert len(module.state_dict()) == 0
    out = module(x)
    ref = lazy_strike_pool(x, topk=3, score='paper', window='centered')
    assert torch.equal(out.pooled, ref.pooled)
    assert torch.equal(out.votes, ref.votes)
    assert 'topk=3' in repr(module)
    assert 'topk_ratio=0.5' in repr(LazyStrikePool(topk_ratio=0.5))


@pytest.mark.parametrize('kwargs', [
    dict(topk=0),
    dict(topk=2.5),
    dict(topk=None),
    dict(topk_ratio=0.),
    dict(topk_ratio=1.5),
    dict(topk=4, topk_ratio=0.5),
    dict(score='median'),
    dict(window='hann'),
])
def test_bad_options_raise(kwargs):
    with pytest.raises(ValueError):
        lazy_strike_pool(torch.randn(1, 4, 6), **kwargs)
    with pytest.raises(ValueError):
        LazyStrikePool(**kwargs)


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match=r'\(B, N, D\)'):
        lazy_strike_pool(torch.randn(4, 6))
    with pytest.raises(ValueError, match='at least one patch'):
        lazy_strike_pool(torch.randn(2, 0, 6))
    with pytest.raises(TypeError, match='float'):
        lazy_strike_pool(torch.ones(1, 4, 6, dtype=torch.long))
    # Non-finite tokens raise when the caller checks (inference); training
    # leaves them to the loss (test_finite.py).
    bad = torch.randn(1, 4, 6)
    bad[0, 1, 2] = float('nan')
    with pytest.raises(ValueError, match='NaN'):
        lazy_strike_pool(bad, check_finite=True)
    bad[0, 1, 2] = float('inf')
    with pytest.raises(ValueError, match='inf'):
        lazy_strike_pool(bad, check_finite=True)


@pytest.mark.parametrize('d', [7, 24])
@pytest.mark.parametrize('window', ['code', 'centered'])
def test_lowpass_as_matmul_equals_fft(d, window):
    x = torch.randn(2, 10, d)
    want = channel_lowpass(x, window)
    with lowpass_as_matmul([d]):
        got = channel_lowpass(x, window)
        pooled = lazy_strike_pool(x, topk=2, window=window)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=0)
    fft = lazy_strike_pool(x, topk=2, window=window)
    torch.testing.assert_close(pooled.pooled, fft.pooled, atol=1e-6, rtol=0)
    assert torch.equal(pooled.votes, fft.votes)
    # cached per (D, window, device, dtype): the same tensor again
    assert lowpass_matrix(d, window) is lowpass_matrix(d, window)
    assert lowpass_matrix(d, window).shape == (d, d)


def test_lowpass_as_matmul_refuses_unprepared_width_and_restores():
    with lowpass_as_matmul([24]):
        with pytest.raises(
                ValueError, match=r'no matrix for 7 channels; '
                r'prepared \[24\]'):
            channel_lowpass(torch.randn(1, 4, 7))
    channel_lowpass(torch.randn(1, 4, 7))  # the FFT again
