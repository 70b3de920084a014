"""tools/analysis_tools/benchmark_with_cp.py: the backbones it measures and
one measured train step with and without ``with_cp`` (tiny arch)."""
import os.path as osp
import sys

import pytest
from helpers.tiny_archs import tiny_vit

import mmlocat  # noqa: F401
from mmlocat.registry import MODELS


@pytest.fixture
def tool(repo_root, monkeypatch):
    monkeypatch.syspath_prepend(osp.join(repo_root, 'tools/analysis_tools'))
    import bench_utils
    import benchmark_with_cp
    yield benchmark_with_cp, bench_utils
    for name in ('benchmark_with_cp', 'bench_utils'):
        sys.modules.pop(name, None)


@pytest.mark.parametrize('name',
                         ['LocAtViT', 'LaStViT', 'CLIPViT', 'EVA02CLIPViT'])
def test_each_backbone_is_measured_with_and_without(tool, name):
    benchmark, bench_utils = tool
    arch = tiny_vit(output_dims=16)
    if name == 'LocAtViT':
        arch.pop('output_dims')
    steps = []
    for with_cp in (False, True):
        cfg = benchmark.backbone_cfg(name, arch, 32, 8, with_cp)
        assert MODELS.build(cfg).with_cp is with_cp
        steps.append(
            bench_utils.run_job(
                dict(
                    model='config',
                    backbone=cfg,
                    mode='train',
                    size=32,
                    batch=2,
                    iters=1,
                    warmup=1,
                    device='cpu',
                    amp=False)))
    for step in steps:
        assert step['ms'] > 0 and step['peak_mb'] >= 0
