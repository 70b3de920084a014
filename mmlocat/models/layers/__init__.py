"""Pure-torch layers: GAug (:mod:`.gaug`), PRR, LazyStrike, patch score and
the global token built from them (:class:`GlobalPool`).

No OpenMMLab import here: these import with mmcv / mmpretrain / mmseg /
mmdet absent (mmengine is imported lazily, for a log message only).
"""
from .gaug import (GAUG_IMPLS, GaussianAugment, chunked_gaug_attention,
                   flex_compile_stats, flex_gaug_attention, gaug_attention,
                   gaug_clamp_value, gaug_eps, resolve_gaug_impl,
                   set_flex_compile_budget)
from .global_pool import POOLINGS, SCORE_QUERIES, GlobalPool
from .lazy_strike import (LazyStrikeOutput, LazyStrikePool, channel_lowpass,
                          lazy_strike_pool, lazy_strike_window,
                          lowpass_as_matmul, lowpass_matrix, resolve_topk)
from .patch_score import patch_score
from .prr import PRR

__all__ = [
    'GaussianAugment', 'gaug_attention', 'gaug_clamp_value', 'gaug_eps', 'PRR',
    'LazyStrikeOutput', 'LazyStrikePool', 'channel_lowpass',
    'lazy_strike_pool', 'lazy_strike_window', 'lowpass_matrix',
    'lowpass_as_matmul', 'resolve_topk', 'patch_score',
    'chunked_gaug_attention', 'flex_gaug_attention', 'GAUG_IMPLS',
    'resolve_gaug_impl', 'set_flex_compile_budget', 'flex_compile_stats',
    'GlobalPool', 'POOLINGS', 'SCORE_QUERIES'
]
