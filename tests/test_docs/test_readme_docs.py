"""docs/*.md's commands, from their own text."""
import os.path as osp

import pytest
from readme_blocks import find_block
from readme_runner import ReadmeRunner

pytestmark = pytest.mark.e2e


def test_onnx_export(new_root):
    root = new_root()
    runner = ReadmeRunner(
        root,
        subs=dict(
            CONFIG='configs/locat/locat-b_8xb128_in1k.py',
            CHECKPOINT='locat-b.pth'))
    out, = runner.run(find_block('docs/deployment.md', 'pytorch2onnx.py'))
    assert osp.isfile(root.abs('locat-b.onnx'))
    assert 'onnxruntime vs PyTorch, max abs diff' in out
