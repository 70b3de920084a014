from .gaug import GaussianAugment, gaug_attention, gaug_clamp_value, gaug_eps
from .gaug_chunked import chunked_gaug_attention
from .gaug_flex import (flex_compile_stats, flex_gaug_attention,
                        set_flex_compile_budget)
from .gaug_kernels import GAUG_IMPLS, resolve_gaug_impl
from .lazy_strike import (LazyStrikeOutput, LazyStrikePool, channel_lowpass,
                          lazy_strike_pool, lazy_strike_window, resolve_topk)
from .patch_score import patch_score
from .prr import PRR

__all__ = [
    'GaussianAugment', 'gaug_attention', 'gaug_clamp_value', 'gaug_eps', 'PRR',
    'LazyStrikeOutput', 'LazyStrikePool', 'channel_lowpass',
    'lazy_strike_pool', 'lazy_strike_window', 'resolve_topk', 'patch_score',
    'chunked_gaug_attention', 'flex_gaug_attention', 'GAUG_IMPLS',
    'resolve_gaug_impl', 'set_flex_compile_budget', 'flex_compile_stats'
]
