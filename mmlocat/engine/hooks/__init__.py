from .gaug_stats_hook import GAugStatsHook
from .ov_label_space_hook import OVLabelSpaceHook
from .rng_state_hook import RNGStateHook

__all__ = ['GAugStatsHook', 'OVLabelSpaceHook', 'RNGStateHook']
