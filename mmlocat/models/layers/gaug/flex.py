"""GAug attention through PyTorch FlexAttention (``score_mod``).

`Locality-Attending Vision Transformer <https://arxiv.org/abs/2603.04892>`_
(Hajimiri et al., ICLR 2026). The Gaussian term is added to each scaled
logit inside the attention kernel from the per-query variance and amplitude
and the token coordinates, so the (N, N) bias never exists. The arithmetic
is the dense reference's, in the same order.

Compilation (the eager kernel materialises the full score matrix, so only
the compiled one is worth running):

* **static, per shape**: one :func:`torch.compile` (``dynamic=False``,
  ``fullgraph=True``) of :func:`_flex_core`. Everything that varies with the
  input and is not a tensor shape -- the grid ``(H, W)``, the prefix count,
  ``eps``, the clamp (on or off) -- reaches the kernel as tensor *values*
  (coordinate tables, a patch mask, a 0-d floor), so no guard on a Python
  constant can force a recompile. A new compilation happens exactly when
  the :func:`compile key <flex_compile_key>` is new: shapes, strides and
  dtypes of q, k, v, the device and whether autograd records. Grids of
  the same token count (4x6, 6x4, 3x8 + 0 prefix ...) share one kernel.
* **bounded**: at most :func:`flex_compile_budget` keys are compiled per
  process (default :data:`DEFAULT_COMPILE_BUDGET`; dynamo's own recompile
  limit is raised to match for this function only, and hitting it is an
  error rather than dynamo's silent eager fallback).
* **never a crash**: if compiling (or running) a key fails, or the budget is
  spent, one warning is logged (mmengine's ``print_log`` when mmengine is
  installed, else :mod:`warnings`) and :class:`FlexFallback` is raised; the
  dispatcher (:func:`~.dispatch.gaug_attention`) then runs the exact
  chunked kernel for that key, silently from then on.

Limits of the installed torch, measured on CPU: FlexAttention has no
backward pass on CPU (the chunked kernel trains there) and a compile takes
~10 s per key for tiny shapes. On CUDA the compiled kernel is fused and
differentiable, gradients included for the captured variance and
amplitude. Pure torch (the optional log goes through mmengine, imported
only when a warning is due).
"""
import logging
import warnings
from typing import Callable, Dict, Optional, Sequence, Tuple

import torch

__all__ = [
    'flex_gaug_attention', 'flex_available', 'FlexFallback',
    'flex_compile_budget', 'set_flex_compile_budget', 'flex_compile_stats',
    'reset_flex_compile_cache', 'flex_compile_key', 'DEFAULT_COMPILE_BUDGET'
]

# Distinct compile keys per process. Real workloads meet a handful (train
# crop, a few test sizes, batch tails); mmseg's whole-image test can meet
# one per image size, which this bounds (the rest runs the chunked kernel).
DEFAULT_COMPILE_BUDGET = 16

_STATE: dict = dict(
    budget=DEFAULT_COMPILE_BUDGET, compiled=None, budget_warned=False)
# compile key -> True (compiled and ran) / False (failed: chunked from now on)
_KEYS: Dict[tuple, bool] = {}


class FlexFallback(RuntimeError):
    """The compiled FlexAttention kernel is not available for this key
    (compilation failed or the compile budget is spent); a warning has been
    logged. The caller runs the chunked kernel instead."""


def _flex_attention() -> Optional[Callable]:
    try:
        from torch.nn.attention.flex_attention import flex_attention
    except ImportError:  # torch < 2.5
        return None
    return flex_attention


def flex_available(device: torch.device) -> bool:
    """Whether a *compiled* FlexAttention kernel can run on ``device``."""
    if _flex_attention() is None:
        return False
    if device.type == 'cuda':
        from torch.utils._triton import has_triton
        return has_triton()
    return device.type == 'cpu'


def flex_compile_budget() -> int:
    """The most compile keys compiled per process."""
    return _STATE['budget']


def set_flex_compile_budget(max_keys: int) -> None:
    """Set :func:`flex_compile_budget` (keys already compiled stay usable).

    Args:
        max_keys: Distinct compile keys to compile at most; 0 disables the
            compiled kernel (every call falls back to the chunked kernel).
    """
    if type(max_keys) is not int or max_keys < 0:  # bool is no budget
        raise ValueError(
            f'the flex compile budget must be an int >= 0, got {max_keys!r}')
    _STATE['budget'] = max_keys
    _STATE['budget_warned'] = False


def flex_compile_stats() -> Dict[str, int]:
    """``compiled`` / ``failed`` key counts and the ``budget``."""
    ok = sum(_KEYS.values())
    return dict(compiled=ok, failed=len(_KEYS) - ok, budget=_STATE['budget'])


def reset_flex_compile_cache() -> None:
    """Forget which keys compiled or failed (tests; dynamo keeps its own
    compiled code until :func:`torch._dynamo.reset`)."""
    _KEYS.clear()
    _STATE['budget_warned'] = False


def flex_compile_key(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     grad: bool) -> tuple:
    """What one static compilation is specialised on.

    Shapes, strides and dtypes of ``q``, ``k``, ``v``, the device and whether
    autograd records (dynamo guards on exactly these for the tensors of
    :func:`_flex_core`; the tables derived from the grid have the token
    count as their only shape, which ``q`` already fixes).
    """
    return (q.device.type, q.device.index, grad) + tuple(
        (tuple(t.shape), t.stride(), t.dtype) for t in (q, k, v))


def _warn(message: str) -> None:
    try:
        from mmengine.logging import print_log
    except ImportError:
        warnings.warn(message, RuntimeWarning, stacklevel=3)
        return
    print_log(message, logger='current', level=logging.WARNING)


def _flex_core(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               row: torch.Tensor, col: torch.Tensor, den: torch.Tensor,
               amp: torch.Tensor, is_patch: torch.Tensor,
               floor: torch.Tensor) -> torch.Tensor:
    """FlexAttention with the GAug ``score_mod``; tensors only, so that a
    static compilation specialises on shapes and nothing else."""

    def score_mod(score, b, head, q_idx, kv_idx):
        d_row = row[q_idx] - row[kv_idx]
        d_col = col[q_idx] - col[kv_idx]
        row_term = torch.maximum(-0.5 * d_row * d_row, floor)
        col_term = torch.maximum(-0.5 * d_col * d_col, floor)
        expo = (
            row_term / den[b, head, q_idx, 0] +
            col_term / den[b, head, q_idx, 1])
        gauss = amp[b, head, q_idx] * torch.exp(expo)
        both = is_patch[q_idx] & is_patch[kv_idx]
        return score + torch.where(both, gauss, torch.zeros_like(gauss))

    return _flex_attention()(q, k, v, score_mod=score_mod)


def _compiled_core() -> Callable:
    if _STATE['compiled'] is None:
        _STATE['compiled'] = torch.compile(
            _flex_core, dynamic=False, fullgraph=True)
    return _STATE['compiled']


def _run_compiled(key: tuple, args: Tuple[torch.Tensor, ...]) -> torch.Tensor:
    """Run the compiled kernel for ``key``, or warn once and raise
    :class:`FlexFallback`."""
    state = _KEYS.get(key)
    if state is False:
        raise FlexFallback('compiled FlexAttention failed for this shape')
    if state is None and sum(_KEYS.values()) >= _STATE['budget']:
        if not _STATE['budget_warned']:
            _STATE['budget_warned'] = True
            _warn(f'GAug FlexAttention: the compile budget of '
                  f'{_STATE["budget"]} input shapes is spent; new shapes '
                  "run the chunked kernel (raise it with mmlocat.models."
                  'layers.set_flex_compile_budget)')
        raise FlexFallback('flex compile budget spent')
    try:
        # One dynamo cache entry per key: allow as many, and fail loudly
        # (caught below) instead of silently running eager flex beyond.
        with torch._dynamo.config.patch(
                recompile_limit=max(_STATE['budget'], 1),
                fail_on_recompile_limit_hit=True):
            out = _compiled_core()(*args)
    except Exception as err:  # noqa: B902 any compiler error: fall back
        _KEYS[key] = False
        q = args[0]
        _warn(f'GAug FlexAttention: compiling / running the kernel for q '
              f'{tuple(q.shape)} {q.dtype} on {q.device} failed '
              f'({type(err).__name__}: {str(err).strip()[:300]}); this '
              'shape runs the chunked kernel from now on')
        raise FlexFallback(str(err)) from err
    _KEYS[key] = True
    return out


def _token_tables(hw: Sequence[int], num_prefix: int, device: torch.device):
    """Row / column index (float32) and patch mask of every token."""
    h, w = hw
    patch = torch.arange(h * w, device=device)
    prefix = torch.zeros(num_prefix, dtype=torch.float32, device=device)
    row = torch.cat((prefix, (patch // w).float()))
    col = torch.cat((prefix, (patch % w).float()))
    is_patch = torch.arange(num_prefix + h * w, device=device) >= num_prefix
    return row, col, is_patch


def flex_gaug_attention(q: torch.Tensor,
                        k: torch.Tensor,
                        v: torch.Tensor,
                        var: torch.Tensor,
                        alpha: torch.Tensor,
                        hw: Sequence[int],
                        eps: float,
                        clamp_value: Optional[float],
                        num_prefix: int,
                        compiled: bool = True) -> torch.Tensor:
    """``softmax(q k^T / sqrt(d) + S) v`` with ``S`` added in ``score_mod``.

    Args:
        q, k, v: Per-head tensors (B, heads, N, d), N = num_prefix + H*W.
        var: Per-query-patch variance (row, col), float32
            (B, heads, H*W, 2), already rescaled to this grid.
        alpha: Per-query-patch amplitude, float32 (B, heads, H*W, 1).
        hw: The patch grid ``(H, W)``.
        eps: Added to the variance.
        clamp_value: Lower bound of each per-axis term, ``None`` for none.
        num_prefix: Prefix tokens (zero bias rows and columns).
        compiled: Run the statically compiled kernel (see the module
            docstring); ``False``: the eager kernel, a slow reference.

    Returns:
        The attention output (B, heads, N, d) in ``q.dtype``.

    Raises:
        FlexFallback: The compiled kernel is unavailable for this key (a
            warning was logged); run the chunked kernel.
    """
    grad = torch.is_grad_enabled() and any(
        t.requires_grad for t in (q, k, v, var, alpha))
    if grad and q.device.type == 'cpu':
        raise NotImplementedError(
            "gaug_cfg=dict(impl='flex') has no backward pass on CPU in this "
            "torch; use gaug_cfg=dict(impl='chunked') (or 'auto') for "
            'training')
    h, w = (int(s) for s in hw)
    n, device = q.shape[2], q.device
    if var.shape[2] != n - num_prefix or h * w != n - num_prefix:
        raise ValueError(f'var {tuple(var.shape)} does not fit {n} tokens '
                         f'with {num_prefix} prefix tokens on a {h}x{w} grid')
    if _flex_attention() is None:
        raise RuntimeError('FlexAttention needs torch >= 2.5; use '
                           "gaug_cfg=dict(impl='chunked')")
    # Per-token tables over all N tokens (prefix entries are never used:
    # the patch mask zeroes every pair that involves a prefix token).
    pad = (0, 0, num_prefix, 0)
    den = torch.nn.functional.pad(var + eps, pad, value=1.)
    amp = torch.nn.functional.pad(alpha, pad)[..., 0]
    row, col, is_patch = _token_tables((h, w), num_prefix, device)
    floor = torch.tensor(
        float('-inf') if clamp_value is None else float(clamp_value),
        device=device)
    args = (q, k, v, row, col, den, amp, is_patch, floor)
    with torch.autocast(device.type, enabled=False):
        if not compiled or torch.compiler.is_compiling():
            # Eager reference, or inside the caller's own torch.compile,
            # which traces (and fuses) this call itself.
            return _flex_core(*args)
        return _run_compiled(flex_compile_key(q, k, v, grad), args)
