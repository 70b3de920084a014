"""mmdet's ``LVISMetric`` usable with numpy >= 1.24.

The PyPI ``lvis`` 0.5.3 evaluation still calls ``np.float``, an alias that
numpy 1.24 removed. This metric restores the alias only while it computes
the metrics and removes it again afterwards; nothing else changes.
"""
import numpy as np
from mmdet.evaluation import LVISMetric

from mmlocat.registry import METRICS

__all__ = ['NumpyCompatLVISMetric']


@METRICS.register_module()
class NumpyCompatLVISMetric(LVISMetric):
    """:class:`mmdet.evaluation.LVISMetric` with the ``np.float`` shim for
    the ``lvis`` package (same arguments and results)."""

    def compute_metrics(self, results: list) -> dict:
        added = 'float' not in np.__dict__
        if added:
            np.float = float  # what lvis 0.5.3 means by np.float
        try:
            return super().compute_metrics(results)
        finally:
            if added:
                del np.float
