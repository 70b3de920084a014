from .gaug_stats_hook import GAugStatsHook
from .ov_label_space_hook import OVLabelSpaceHook

__all__ = ['GAugStatsHook', 'OVLabelSpaceHook']
