"""NumpyCompatLVISMetric: lvis 0.5.3 runs with numpy >= 1.24."""
import numpy as np
import pytest

from mmlocat.evaluation import NumpyCompatLVISMetric


def test_alias_only_during_compute(monkeypatch):
    pytest.importorskip('lvis')
    seen = []

    def fake_compute(self, results):
        seen.append(np.float is float)
        return dict(ok=1)

    from mmdet.evaluation import LVISMetric
    monkeypatch.setattr(LVISMetric, 'compute_metrics', fake_compute)
    had = 'float' in np.__dict__
    metric = NumpyCompatLVISMetric.__new__(NumpyCompatLVISMetric)
    assert metric.compute_metrics([]) == dict(ok=1)
    assert seen == [True]
    assert ('float' in np.__dict__) == had
