from .clip_hooks import CLIPProvenanceHook, LogitScaleClampHook
from .gaug_stats_hook import GAugStatsHook
from .ov_label_space_hook import OVLabelSpaceHook
from .rng_state_hook import RNGStateHook
from .skipped_files_hook import SkippedFilesHook
from .zero_shot_class_hook import ZeroShotClassCheckHook

__all__ = [
    'CLIPProvenanceHook', 'GAugStatsHook', 'LogitScaleClampHook',
    'OVLabelSpaceHook', 'RNGStateHook', 'SkippedFilesHook',
    'ZeroShotClassCheckHook'
]
