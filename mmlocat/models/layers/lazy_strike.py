"""LazyStrike pooling: the parameter-free global token of LaSt-ViT.

"Vision Transformers Need More Than Registers" (Shi, Yu, Yang, CVPR 2026),
https://arxiv.org/abs/2602.22394; the math: ``docs/method.md#lazystrike``,
after the behaviour of the authors' public code (ChengShiest/LAST-ViT).

Every patch token is low-pass filtered along its channel axis; a channel
votes for the patches whose value there is most *stable* under that filter,
and the global token takes, per channel, the mean of the original values of
its top-K patches. Pure torch: no OpenMMLab import.
"""
import contextlib
import math
from typing import Dict, FrozenSet, Iterator, NamedTuple, Optional, Sequence

import torch
from torch import Tensor, nn

from .finite import finite_checks_on, refuse_nonfinite

__all__ = [
    'LazyStrikeOutput', 'lazy_strike_pool', 'LazyStrikePool',
    'channel_lowpass', 'lazy_strike_window', 'resolve_topk', 'lowpass_matrix',
    'lowpass_as_matmul'
]

_SCORES = ('code', 'paper')
_WINDOWS = ('code', 'centered')


class LazyStrikeOutput(NamedTuple):
    """Result of LazyStrike pooling.

    Attributes:
        pooled: ``(B, D)`` global token ``q``, in the input dtype.
        votes: ``(B, N)`` float32 count of channels whose top-K contains
            each patch (float32 so counts stay exact for bf16 inputs).
    """
    pooled: Tensor
    votes: Tensor


def lazy_strike_window(num_channels: int,
                       window: str = 'code',
                       device: Optional[torch.device] = None) -> Tensor:
    """Peak-normalised Gaussian window over fftshift-ed channel frequencies.

    ``sigma = sqrt(D)``. With ``window='code'`` the positions are
    ``arange(-D // 2 + 1, D // 2 + 1)`` as in the public code, which puts the
    peak one bin below the DC bin for even ``D`` (bug-compatible with the
    released weights); ``'centered'`` puts the peak exactly on the DC bin
    (index ``D // 2`` after ``fftshift``). Both agree for odd ``D``.

    Args:
        num_channels: Window length ``D``.
        window: ``'code'`` or ``'centered'``.
        device: Device of the returned float32 window.

    Returns:
        Float32 tensor of shape ``(D,)`` with maximum 1.
    """
    if window not in _WINDOWS:
        raise ValueError(f'window must be one of {_WINDOWS}, got {window!r}')
    if num_channels < 1:
        raise ValueError(f'need at least one channel, got {num_channels}')
    d = num_channels
    if window == 'code':
        # (-D) // 2 + 1 ... D // 2: D positions, Python floor division.
        pos = torch.arange(-d // 2 + 1, d // 2 + 1, device=device)
    else:
        pos = torch.arange(d, device=device) - d // 2
    sigma = math.sqrt(d)
    g = torch.exp(-0.5 * (pos.float() / sigma)**2)
    return g / g.max()


def _fft_lowpass(xf: Tensor, window: str) -> Tensor:
    g = lazy_strike_window(xf.shape[-1], window, device=xf.device)
    spec = torch.fft.fftshift(torch.fft.fft(xf, dim=-1), dim=-1)
    spec = torch.fft.ifftshift(spec * g, dim=-1)
    return torch.fft.ifft(spec, dim=-1).real


# Low-pass matrices by (D, window, device, dtype); see lowpass_matrix.
_MATRICES: Dict[tuple, Tensor] = {}
# Channel counts for which channel_lowpass uses the matrix; None: the FFT.
_MATMUL_CHANNELS: Optional[FrozenSet[int]] = None


def lowpass_matrix(num_channels: int,
                   window: str = 'code',
                   device: Optional[torch.device] = None,
                   dtype: torch.dtype = torch.float32) -> Tensor:
    """The channel low-pass as a real ``(D, D)`` matrix ``M``.

    The filter is linear along the channel axis, so ``lowpass(x) = x @ M``
    with ``M = lowpass(I)``, computed with the FFT itself and cached per
    ``(D, window, device, dtype)``.
    """
    key = (int(num_channels), window, torch.device(device or 'cpu'), dtype)
    if key not in _MATRICES:
        eye = torch.eye(key[0], device=key[2])
        _MATRICES[key] = _fft_lowpass(eye, window).to(dtype)
    return _MATRICES[key]


@contextlib.contextmanager
def lowpass_as_matmul(channels: Sequence[int]) -> Iterator[None]:
    """Inside the block, :func:`channel_lowpass` multiplies by
    :func:`lowpass_matrix` instead of running the FFT.

    Same values to float32 round-off; the product exports to ONNX
    ``MatMul`` (ONNX has no complex tensors, and torch's TorchScript
    exporter no ``aten::fft_fft``). The matrices are computed on entry, so
    that a trace records them as constants; a width not in ``channels``
    raises. Not thread-safe (module state, restored on exit).

    Args:
        channels: The channel counts ``D`` to prepare (e.g. the backbone's
            width).
    """
    global _MATMUL_CHANNELS
    prepared = frozenset(int(d) for d in channels)
    for d in prepared:
        for w in _WINDOWS:
            lowpass_matrix(d, w)
    previous, _MATMUL_CHANNELS = _MATMUL_CHANNELS, prepared
    try:
        yield
    finally:
        _MATMUL_CHANNELS = previous


def channel_lowpass(x: Tensor, window: str = 'code') -> Tensor:
    """Low-pass every token along its channel axis (float32 FFT).

    Inside :func:`lowpass_as_matmul` the same filter is a matrix product.

    Args:
        x: ``(..., D)`` tokens.
        window: See :func:`lazy_strike_window`.

    Returns:
        The float32 real part ``x_hat`` of the filtered tokens.
    """
    xf = x.float()
    if _MATMUL_CHANNELS is None:
        return _fft_lowpass(xf, window)
    d = int(xf.shape[-1])
    if d not in _MATMUL_CHANNELS:
        raise ValueError(f'lowpass_as_matmul: no matrix for {d} channels; '
                         f'prepared {sorted(_MATMUL_CHANNELS)}')
    return xf @ lowpass_matrix(d, window, xf.device, xf.dtype)


def resolve_topk(num_patches: int,
                 topk: Optional[int] = 1,
                 topk_ratio: Optional[float] = None) -> int:
    """Number of patches ``K`` each channel keeps.

    ``topk_ratio`` (for variable input sizes) wins when given:
    ``K = max(1, round(topk_ratio * N))`` with Python's ``round``. Either
    way ``K`` is clamped to ``N``; ``K = N`` degenerates to mean pooling.
    """
    if num_patches < 1:
        raise ValueError(f'need at least one patch token, got {num_patches}')
    _check_topk_args(topk, topk_ratio)
    if topk_ratio is not None:
        k = max(1, int(round(topk_ratio * num_patches)))
    else:
        k = topk
    return min(k, num_patches)


def _check_topk_args(topk: Optional[int], topk_ratio: Optional[float]):
    if topk_ratio is not None:
        if not 0 < topk_ratio <= 1:
            raise ValueError(f'topk_ratio must be in (0, 1], got {topk_ratio}')
        if topk not in (None, 1):
            raise ValueError('give either topk or topk_ratio, not both '
                             f'(topk={topk}, topk_ratio={topk_ratio})')
        return
    if topk is None:
        raise ValueError('one of topk or topk_ratio must be given')
    if isinstance(topk, bool) or not isinstance(topk, int) or topk < 1:
        raise ValueError(f'topk must be a positive int, got {topk!r}')


def _stability_score(x: Tensor, x_hat: Tensor, score: str,
                     eps: float) -> Tensor:
    """Per patch and channel stability ``S`` (float32, never NaN)."""
    diff = (x_hat - x).abs()
    if score == 'code':
        # The public code divides by |x_hat - x| with no epsilon. Flooring the
        # denominator at the smallest positive normal float only changes
        # exact zeros: 0 / 0 becomes 0 and v / 0 a huge (or inf) signed value
        # instead of NaN, so the top-K stays defined.
        return x / diff.clamp_min(torch.finfo(diff.dtype).tiny)
    return x_hat / (diff + eps)


def lazy_strike_pool(x: Tensor,
                     topk: Optional[int] = 1,
                     topk_ratio: Optional[float] = None,
                     score: str = 'code',
                     window: str = 'code',
                     eps: float = 1e-6,
                     check_finite: bool = False) -> LazyStrikeOutput:
    """Pool patch tokens into a global token with LazyStrike.

    Args:
        x: ``(B, N, D)`` patch tokens after the final norm, prefix (CLS and
            register) tokens removed. Any float dtype; the scoring runs in
            float32.
        topk: Patches kept per channel (clamped to ``N``). The released
            supervised weights use 1.
        topk_ratio: Fraction of ``N`` to keep instead of ``topk``.
        score: ``'code'`` (default): ``S = x / |x_hat - x|``;
            ``'paper'``: ``S = x_hat / (|x_hat - x| + eps)``.
        window: ``'code'`` (default, off-by-one peak for even ``D``) or
            ``'centered'``; see :func:`lazy_strike_window`.
        eps: Denominator epsilon of the ``'paper'`` score.
        check_finite: Raise on NaN / inf in the tokens or the pooled token
            (one host sync): the caller's decision, see
            :func:`~.finite.finite_checks_on`. Off by default: no host sync,
            a non-finite value reaches the loss.

    Returns:
        :class:`LazyStrikeOutput` with the pooled ``(B, D)`` token (same
        dtype as ``x``) and the ``(B, N)`` float32 vote counts. Gradients
        reach ``x`` only through the gathered entries.
    """
    if not isinstance(x, Tensor) or x.dim() != 3:
        shape = tuple(x.shape) if isinstance(x, Tensor) else type(x)
        raise ValueError(f'LazyStrike expects (B, N, D) tokens, got {shape}')
    if not x.is_floating_point():
        raise TypeError(f'LazyStrike expects float tokens, got {x.dtype}')
    if score not in _SCORES:
        raise ValueError(f'score must be one of {_SCORES}, got {score!r}')
    if not eps > 0:
        raise ValueError(f'eps must be positive, got {eps}')
    batch, num_patches, channels = x.shape
    if channels < 1:
        raise ValueError(f'need at least one channel, got shape {x.shape}')
    k = resolve_topk(num_patches, topk, topk_ratio)

    with torch.no_grad():
        xf = x.detach().float()
        x_hat = channel_lowpass(xf, window)
        s = _stability_score(xf, x_hat, score, eps)
        index = s.topk(k, dim=1).indices  # (B, K, D)
        votes = torch.zeros(
            batch, num_patches, device=x.device, dtype=torch.float32)
        votes.scatter_add_(
            1, index.reshape(batch, k * channels),
            torch.ones(
                batch, k * channels, device=x.device, dtype=torch.float32))

    pooled = torch.gather(x, 1, index).float().mean(dim=1).to(x.dtype)
    if check_finite:
        refuse_nonfinite('LazyStrike', dict(tokens=x), dict(pooled=pooled))
    return LazyStrikeOutput(pooled, votes)


class LazyStrikePool(nn.Module):
    """Module form of :func:`lazy_strike_pool` (no parameters).

    Args:
        topk: Patches kept per channel.
        topk_ratio: Fraction of the patches kept instead of ``topk``.
        score: ``'code'`` or ``'paper'``.
        window: ``'code'`` or ``'centered'``.
        eps: Denominator epsilon of the ``'paper'`` score.
    """

    def __init__(self,
                 topk: Optional[int] = 1,
                 topk_ratio: Optional[float] = None,
                 score: str = 'code',
                 window: str = 'code',
                 eps: float = 1e-6) -> None:
        super().__init__()
        _check_topk_args(topk, topk_ratio)
        if score not in _SCORES:
            raise ValueError(f'score must be one of {_SCORES}, got {score!r}')
        if window not in _WINDOWS:
            raise ValueError(
                f'window must be one of {_WINDOWS}, got {window!r}')
        if not eps > 0:
            raise ValueError(f'eps must be positive, got {eps}')
        self.topk = topk
        self.topk_ratio = topk_ratio
        self.score = score
        self.window = window
        self.eps = eps

    def forward(self,
                x: Tensor,
                check_finite: Optional[bool] = None) -> LazyStrikeOutput:
        """Pool ``(B, N, D)`` patch tokens (``check_finite``: see
        :func:`~.finite.finite_checks_on`, with this module's mode)."""
        return lazy_strike_pool(x, self.topk, self.topk_ratio, self.score,
                                self.window, self.eps,
                                finite_checks_on(check_finite, self.training))

    def extra_repr(self) -> str:
        k = (f'topk_ratio={self.topk_ratio}'
             if self.topk_ratio is not None else f'topk={self.topk}')
        return f'{k}, score={self.score!r}, window={self.window!r}'
