"""GAug, the Gaussian attention bias of LocAtViT, and its kernels.

`Locality-Attending Vision Transformer <https://arxiv.org/abs/2603.04892>`_
(Hajimiri et al., ICLR 2026). Pure torch. Imports run one way:

* :mod:`.bias`: :class:`GaussianAugment` (the bias and its separable
  factors); imports nothing of mmlocat;
* :mod:`.dispatch`: :func:`gaug_attention`, the single entry point, which
  picks a kernel and feeds it the bias module's public outputs;
* :mod:`.chunked` (with its private block planner :mod:`._blocks`): the
  exact query-block kernel;
* :mod:`.flex`: the FlexAttention kernel.
"""
from .bias import GAUG_PRECISIONS, GaussianAugment, gaug_clamp_value, gaug_eps
from .chunked import chunked_gaug_attention
from .dispatch import GAUG_IMPLS, gaug_attention, resolve_gaug_impl
from .flex import (flex_compile_stats, flex_gaug_attention,
                   set_flex_compile_budget)

__all__ = [
    'GaussianAugment', 'gaug_attention', 'gaug_clamp_value', 'gaug_eps',
    'GAUG_IMPLS', 'GAUG_PRECISIONS', 'resolve_gaug_impl',
    'chunked_gaug_attention', 'flex_gaug_attention', 'set_flex_compile_budget',
    'flex_compile_stats'
]
