from .gaug import GaussianAugment, gaug_attention, gaug_clamp_value, gaug_eps
from .lazy_strike import (LazyStrikeOutput, LazyStrikePool, channel_lowpass,
                          lazy_strike_pool, lazy_strike_window, resolve_topk)
from .patch_score import patch_score
from .prr import PRR

__all__ = [
    'GaussianAugment', 'gaug_attention', 'gaug_clamp_value', 'gaug_eps', 'PRR',
    'LazyStrikeOutput', 'LazyStrikePool', 'channel_lowpass',
    'lazy_strike_pool', 'lazy_strike_window', 'resolve_topk', 'patch_score'
]
