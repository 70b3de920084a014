from .gaug_stats_hook import GAugStatsHook

__all__ = ['GAugStatsHook']
