from mmlocat.utils.hosts import is_installed
from .coarse_seg import CoarseSegIoU
from .corloc import CorLoc
from .pib import PointInBox
from .retrieval import RetrievalRecall
from .zero_shot import ZeroShotAccuracy

__all__ = [
    'PointInBox', 'CorLoc', 'CoarseSegIoU', 'ZeroShotAccuracy',
    'RetrievalRecall'
]

# mmdet's LVIS metric wrapper needs mmdet (and lvis at evaluation time).
if is_installed('mmdet'):
    from .lvis_metric import NumpyCompatLVISMetric  # noqa: F401
    __all__.append('NumpyCompatLVISMetric')
