from .probe_head import SegProbeHead

__all__ = ['SegProbeHead']
