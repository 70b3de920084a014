from mmlocat.utils.hosts import is_installed
from .coarse_seg import CoarseSegIoU
from .corloc import CorLoc
from .pib import PointInBox

__all__ = ['PointInBox', 'CorLoc', 'CoarseSegIoU']

# mmdet's LVIS metric wrapper needs mmdet (and lvis at evaluation time).
if is_installed('mmdet'):
    from .lvis_metric import NumpyCompatLVISMetric  # noqa: F401
    __all__.append('NumpyCompatLVISMetric')
