from .probe_head import SegProbeHead
from .zero_shot_segmentor import ZeroShotSegmentor

__all__ = ['SegProbeHead', 'ZeroShotSegmentor']
