from .checkpoint_hook import AtomicCheckpointHook, AtomicLocalBackend
from .clip_hooks import LogitScaleClampHook
from .gaug_stats_hook import GAugStatsHook
from .ov_label_space_hook import OVLabelSpaceHook
from .preemption_hook import PreemptionHook
from .record_hook import CLIPProvenanceHook, RecordHook, VocabularyRecordHook
from .rng_state_hook import RNGStateHook
from .skipped_files_hook import SkippedFilesHook
from .weights_only_checkpoint_hook import WeightsOnlyCheckpointHook
from .zero_shot_class_hook import ZeroShotClassCheckHook

__all__ = [
    'AtomicCheckpointHook', 'AtomicLocalBackend', 'CLIPProvenanceHook',
    'GAugStatsHook', 'LogitScaleClampHook', 'OVLabelSpaceHook',
    'PreemptionHook', 'RNGStateHook', 'SkippedFilesHook',
    'VocabularyRecordHook', 'RecordHook', 'WeightsOnlyCheckpointHook',
    'ZeroShotClassCheckHook'
]
