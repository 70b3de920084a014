from .gaug_stats_hook import GAugStatsHook
from .rng_state_hook import RNGStateHook

__all__ = ['GAugStatsHook', 'RNGStateHook']
