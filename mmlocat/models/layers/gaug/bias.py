"""GAug: the Gaussian attention bias of LocAtViT.

`Locality-Attending Vision Transformer <https://arxiv.org/abs/2603.04892>`_
(Hajimiri et al., ICLR 2026). Every block adds to its *already scaled*
attention logits a bias ``S`` that favours spatially close patches::

    S[p, t] = alpha_p * exp(-1/2 * sum_m (c_pm - c_tm)^2 / (var_pm + eps))

where ``c`` are integer grid indices, and the per-axis variance ``var_p``
and the amplitude ``alpha_p`` are predicted from the raw query of patch
``p`` (per head, with one pair of linear layers shared by all heads).
Prefix tokens (CLS, registers) get zero rows and columns.

The numbers follow the authors' public (timm based) implementation, which
the published checkpoints were trained with; the code here is written
independently. Pure torch: no OpenMMLab import, and no import of the
kernels (they receive this module's outputs from the dispatcher).
"""
import math
from collections import OrderedDict
from typing import Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    'GaussianAugment', 'gaug_eps', 'gaug_clamp_value', 'GAUG_PRECISIONS'
]

# 'fp32': variance, amplitude, division and exp in float32 under autocast
# (stable); 'public': in the autocast dtype, as the public code computes
# them (its ``autocast(enabled=False)`` blocks do not upcast fp16 inputs).
GAUG_PRECISIONS = ('fp32', 'public')
# The public code's fast GAug: 2x2-pooled queries in training from this
# training-grid height on.
_FAST_MIN_GRID = 32

Factors = Tuple[torch.Tensor, torch.Tensor]
# Smallest kept factor of the separable bias: 2^-63 * 2^-63 is float32's
# smallest normal number (see GaussianAugment.axis_gauss).
_TINY = 2.**-63
# exp() below -87.3 is subnormal in float32, which is slow to produce.
_MIN_EXPONENT = -80.

# fp16 safety margin of the public code: half of fp16's largest value.
_FP16_HALF_MAX = 65000 / 2
# The clamp never goes below this, so the division by the smallest eps
# stays representable in fp16.
_CLAMP_FLOOR = -6550.


def gaug_eps(grid_size: Sequence[int]) -> float:
    """Variance offset: 0.1, doubled until the division is fp16-safe.

    The largest numerator is ``0.5 * (max(H0, W0) - 1) ** 2``; it divided by
    ``eps ** 2`` (its gradient) must stay below half of fp16's maximum.

    Args:
        grid_size: The patch grid ``(H0, W0)`` at the training resolution.

    Returns:
        The ``eps`` added to the predicted variance.
    """
    eps = 0.1
    numerator = 0.5 * (max(grid_size) - 1)**2
    while numerator / eps**2 > _FP16_HALF_MAX:
        eps *= 2
    return eps


def gaug_clamp_value(grid_size: Sequence[int]) -> float:
    """Lower bound of each per-axis term ``-1/2 * delta^2``.

    A no-op at the training grid; at larger grids offsets beyond
    ``max(H0, W0) - 1`` patches count as that offset.
    """
    return max(-0.5 * (max(grid_size) - 1)**2, _CLAMP_FLOOR)


# (length, clamp, device) -> terms; at most _AXIS_CACHE_SIZE entries
_AXIS_CACHE: 'OrderedDict[Tuple, torch.Tensor]' = OrderedDict()
_AXIS_CACHE_SIZE = 32


def _axis_terms(length: int, clamp_value: Optional[float],
                device: torch.device) -> torch.Tensor:
    """``-1/2 * (i - j)^2`` for ``i, j < length``, clamped below, float32.

    Cached per (length, clamp, device); the result is read-only for callers.
    Created outside inference mode so that a first call under
    ``torch.inference_mode`` does not poison later training steps. Only a
    plain tensor is cached: one made under a tensor mode (a
    ``FakeTensorMode`` of FLOP counting or export tracing) is a
    placeholder without values, and a later real forward would read it.
    """
    key = (length, clamp_value, device)
    terms = _AXIS_CACHE.get(key)
    if terms is not None:
        _AXIS_CACHE.move_to_end(key)
        return terms
    with torch.inference_mode(False):
        idx = torch.arange(length, device=device, dtype=torch.float32)
        terms = -0.5 * (idx[:, None] - idx[None, :])**2
        if clamp_value is not None:
            terms = terms.clamp(min=clamp_value)
    if type(terms) is torch.Tensor:  # noqa: E721 (subclasses: fake, ...)
        _AXIS_CACHE[key] = terms
        if len(_AXIS_CACHE) > _AXIS_CACHE_SIZE:
            _AXIS_CACHE.popitem(last=False)
    return terms


def _flushed_exp(exponent: torch.Tensor,
                 scale: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``scale * exp(exponent)`` with results below 2^-63 set to 0.

    Without autograd, ``exponent`` is overwritten with the result.

    Exponents are clamped at -80 first so that ``exp`` never produces a
    subnormal (slow); that changes only results that are flushed anyway
    (``scale * exp(-80) < 2^-63`` for any ``scale < 5e15``).
    """
    if torch.is_grad_enabled() and (exponent.requires_grad or
                                    (scale is not None
                                     and scale.requires_grad)):
        out = torch.exp(exponent.clamp(min=_MIN_EXPONENT))
        if scale is not None:
            out = out * scale
        return F.threshold(out, _TINY, 0.)
    # Inference: in place on the (fresh) exponent, no temporaries.
    out = exponent.clamp_(min=_MIN_EXPONENT).exp_()
    if scale is not None:
        out.mul_(scale)
    return F.threshold(out, _TINY, 0., inplace=True)


def _expand_blocks(bias: torch.Tensor, small_hw: Tuple[int, int],
                   rate: int) -> torch.Tensor:
    """(..., h*w, h*w) on the pooled grid -> (..., H*W, H*W), each value
    repeated over a ``rate x rate`` block of queries and of keys."""
    lead = bias.shape[:-2]
    bias = bias.reshape(*lead, *small_hw, *small_hw)
    for dim in range(-4, 0):
        bias = bias.repeat_interleave(rate, dim=dim)
    side = small_hw[0] * small_hw[1] * rate * rate
    return bias.reshape(*lead, side, side)


class GaussianAugment(nn.Module):
    """Predicts the Gaussian attention bias of one block.

    Args:
        head_dims: Channels per attention head ``d``.
        grid_size: Patch grid ``(H0, W0)`` at the *training* resolution. The
            variance cap ``c = max(H0, W0)^2``, ``eps`` and the clamp are
            derived from it and never change with the input size.
        num_prefix_tokens: Tokens before the patches (CLS + registers).
        clamp: Clamp each per-axis term at :func:`gaug_clamp_value`. Turn it
            off for attention visualisation.
        precision: ``'fp32'`` (default: the bias arithmetic in float32 even
            under fp16 autocast) or ``'public'`` (in the dtype of the query,
            i.e. fp16 under fp16 AMP, as the public code trained its
            checkpoints; needs the dense kernel).
        fast: The public code's approximate "fast GAug", opt-in: when the
            training grid has >= 32 rows, in training mode only, the
            variance and amplitude come from 2x2 average-pooled queries and
            the Gaussian is evaluated on the even rows / columns, each value
            shared by a 2x2 block of queries and of keys. Off by default
            (none of the published models used it); needs the dense kernel.
    """

    def __init__(self,
                 head_dims: int,
                 grid_size: Sequence[int],
                 num_prefix_tokens: int = 1,
                 clamp: bool = True,
                 precision: str = 'fp32',
                 fast: bool = False) -> None:
        super().__init__()
        if precision not in GAUG_PRECISIONS:
            raise ValueError(f'gaug precision must be one of '
                             f'{GAUG_PRECISIONS}, got {precision!r}')
        grid_size = tuple(int(s) for s in grid_size)
        if len(grid_size) != 2 or min(grid_size) < 1:
            raise ValueError(f'grid_size must be (H0, W0) with positive '
                             f'sides, got {grid_size}')
        if num_prefix_tokens < 0:
            raise ValueError('num_prefix_tokens must be >= 0, got '
                             f'{num_prefix_tokens}')
        self.head_dims = head_dims
        self.grid_size = grid_size
        self.num_prefix_tokens = num_prefix_tokens
        self.clamp = clamp
        self.precision = precision
        self.fast = fast
        self.cap = float(max(grid_size)**2)
        # The shift makes f(0) = 1; the public code uses no shift for c <= 2.
        self.shift = math.log(self.cap - 1) if self.cap > 2 else 0.
        self.eps = gaug_eps(grid_size)

        self.log_var = nn.Linear(head_dims, 2)
        self.log_alpha = nn.Linear(head_dims, 1)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Small weights, zero bias: var starts at ~1 and alpha at ~ln 2."""
        for layer in (self.log_var, self.log_alpha):
            nn.init.trunc_normal_(layer.weight, std=.02)
            nn.init.zeros_(layer.bias)

    def init_weights(self) -> None:
        """:meth:`reset_parameters`, called by the owning backbone's
        ``init_weights`` (mmengine walks the children), so GAug is
        (re)initialised there as every host parameter is."""
        self.reset_parameters()

    def extra_repr(self) -> str:
        return (f'head_dims={self.head_dims}, grid_size={self.grid_size}, '
                f'num_prefix_tokens={self.num_prefix_tokens}, '
                f'clamp={self.clamp}, eps={self.eps}, '
                f'precision={self.precision!r}, fast={self.fast}')

    @property
    def needs_dense(self) -> bool:
        """Whether only the dense kernel computes this bias as configured
        (the public precision or an active fast GAug)."""
        return self.precision == 'public' or self._fast_active()

    def _fast_active(self) -> bool:
        return (self.fast and self.training
                and self.grid_size[0] >= _FAST_MIN_GRID)

    def _dtype_for(self, z: torch.Tensor) -> torch.dtype:
        return z.dtype if self.precision == 'public' else torch.float32

    def _check(self, q: torch.Tensor, hw: Sequence[int]) -> Tuple[int, int]:
        if q.dim() != 4 or q.shape[-1] != self.head_dims:
            raise ValueError(f'expected q of shape (B, heads, N, '
                             f'{self.head_dims}), got {tuple(q.shape)}')
        h, w = (int(s) for s in hw)
        if q.shape[2] != self.num_prefix_tokens + h * w:
            raise ValueError(
                f'q has {q.shape[2]} tokens but the grid {h}x{w} with '
                f'{self.num_prefix_tokens} prefix tokens needs '
                f'{self.num_prefix_tokens + h * w}')
        return h, w

    def variance_and_alpha(
            self, q_patch: torch.Tensor,
            hw: Sequence[int]) -> Tuple[torch.Tensor, torch.Tensor]:
        """Per-query variance (2 axes) and amplitude, in float32 (in the
        query's dtype with ``precision='public'``).

        Args:
            q_patch: Raw queries of the patch tokens, (B, heads, H*W, d).
            hw: The actual patch grid ``(H, W)``.

        Returns:
            ``var`` (B, heads, H*W, 2) (row, col) and ``alpha``
            (B, heads, H*W, 1).
        """
        z_var = self.log_var(q_patch)
        z_alpha = self.log_alpha(q_patch)
        dtype = self._dtype_for(z_var)
        with torch.autocast(device_type=q_patch.device.type, enabled=False):
            var = self.cap * torch.sigmoid(z_var.to(dtype) - self.shift)
            if tuple(hw) != self.grid_size:
                # Other grids rescale the Gaussian linearly in the side.
                var = var * (min(hw) / min(self.grid_size))
            alpha = F.softplus(z_alpha.to(dtype))
        return var, alpha

    def compute_bias(self, q: torch.Tensor, hw: Sequence[int]) -> torch.Tensor:
        """The attention bias ``S``.

        Args:
            q: Raw per-head queries (before the ``1/sqrt(d)`` scale),
                (B, heads, N, d) with ``N = num_prefix_tokens + H*W``.
            hw: The actual patch grid ``(H, W)`` of this input.

        Returns:
            ``S`` of shape (B, heads, N, N) in ``q.dtype``, zero in the
            prefix rows and columns.
        """
        h, w = self._check(q, hw)
        num_prefix = self.num_prefix_tokens
        q_patch = q[:, :, num_prefix:]
        rate = 2 if self._fast_active() else 1
        if rate > 1:
            if h % rate or w % rate:
                raise ValueError(f'the fast GAug pools 2x2 queries and needs '
                                 f'an even patch grid, got {h}x{w}')
            b, heads, _, d = q_patch.shape
            q_patch = q_patch.reshape(b, heads, h // 2, 2, w // 2, 2,
                                      d).mean(dim=(3, 5)).flatten(2, 3)
        var, alpha = self.variance_and_alpha(q_patch, (h, w))
        clamp_value = self.clamp_value()
        # The fast GAug evaluates queries and keys at even coordinates.
        rows = _axis_terms(h, clamp_value, q.device)[::rate, ::rate]
        cols = _axis_terms(w, clamp_value, q.device)[::rate, ::rate]
        # Query p sits at (p // w, p % w) in raster order.
        row_of = torch.arange(
            h // rate, device=q.device).repeat_interleave(w // rate)
        col_of = torch.arange(w // rate, device=q.device).repeat(h // rate)
        with torch.autocast(device_type=q.device.type, enabled=False):
            # The exponent is separable: (rows term) + (cols term), so the
            # (H*W)^2 x 2 offset table is never materialised.
            row_exp = rows[row_of].to(var.dtype) / (var[..., 0:1] + self.eps)
            col_exp = cols[col_of].to(var.dtype) / (var[..., 1:2] + self.eps)
            exponent = row_exp[..., :, None] + col_exp[..., None, :]
            gauss = torch.exp(exponent.flatten(-2))
            bias = alpha * gauss
        if rate > 1:
            bias = _expand_blocks(bias, (h // rate, w // rate), rate)
        if num_prefix:
            bias = F.pad(bias, (num_prefix, 0, num_prefix, 0))
        return bias.to(q.dtype)

    def clamp_value(self) -> Optional[float]:
        """The active lower bound of the per-axis terms, or ``None``."""
        return gaug_clamp_value(self.grid_size) if self.clamp else None

    def factors(self, q: torch.Tensor, hw: Sequence[int]) -> Factors:
        """Checked per-query ``(var, alpha)`` of the patch queries.

        Args:
            q: Raw per-head queries (B, heads, N, d), prefix included.
            hw: The actual patch grid ``(H, W)``.

        Returns:
            See :meth:`variance_and_alpha`.
        """
        hw = self._check(q, hw)
        return self.variance_and_alpha(q[:, :, self.num_prefix_tokens:], hw)

    def axis_gauss(self,
                   var: torch.Tensor,
                   alpha: torch.Tensor,
                   hw: Sequence[int],
                   start: int = 0) -> Factors:
        """The separable factors of the bias, float32.

        ``S[p, (r, c)] = row_gauss[p, r] * col_gauss[p, c]`` for patches.

        Args:
            var: (..., P, 2) from :meth:`factors`, for the ``P`` query
                patches ``start .. start + P - 1`` (raster order).
            alpha: (..., P, 1) from :meth:`factors`, same queries.
            hw: The actual patch grid ``(H, W)``.
            start: Index of the first query patch.

        Returns:
            ``row_gauss`` (..., P, H), amplitude included, and
            ``col_gauss`` (..., P, W).
        """
        h, w = (int(s) for s in hw)
        device = var.device
        clamp_value = self.clamp_value()
        rows = _axis_terms(h, clamp_value, device)
        cols = _axis_terms(w, clamp_value, device)
        patch = torch.arange(start, start + var.shape[-2], device=device)
        with torch.autocast(device_type=device.type, enabled=False):
            # Far tails underflow into float32 subnormals, and arithmetic
            # on subnormals is ~100x slower on x86 (it makes the dense bias
            # ~10x slower than plain attention at 1024^2). Factors below
            # 2^-63 become 0, so no product of two factors is subnormal;
            # each dropped bias term is < alpha * 2^-63, far below the
            # round-off of any logit it is added to.
            row_gauss = _flushed_exp(
                rows[patch // w] / (var[..., 0:1] + self.eps), alpha)
            col_gauss = _flushed_exp(cols[patch % w] /
                                     (var[..., 1:2] + self.eps))
        return row_gauss, col_gauss

    def forward(self,
                q: torch.Tensor,
                hw: Sequence[int],
                return_factors: bool = False):
        """The bias (:meth:`compute_bias`), or with ``return_factors`` the
        per-query ``(var, alpha)`` (:meth:`factors`) that the memory-light
        kernels use. Either way a module call, so forward hooks fire."""
        if return_factors:
            return self.factors(q, hw)
        return self.compute_bias(q, hw)
