"""tools/misc/check_stack.py on the installed stack (real mmcv ops)."""
import pytest
from helpers.harness import run_tool

pytestmark = pytest.mark.e2e

SCRIPT = 'tools/misc/check_stack.py'


def _cuda_ops() -> bool:
    from mmcv.ops import get_compiling_cuda_version
    return get_compiling_cuda_version() != 'not available'


def test_check_stack_runs_the_ops():
    proc = run_tool(SCRIPT, '--no-cuda')
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert 'stack OK: torch ' in proc.stdout
    assert 'mmcv.ops nms and RoIAlign ran on cpu' in proc.stdout


def test_expect_cuda_names_missing_cuda_ops():
    proc = run_tool(SCRIPT, '--expect-cuda')
    if _cuda_ops():  # a CUDA build of mmcv: the check passes
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert 'mmcv ops CUDA' in proc.stdout
    else:
        assert proc.returncode == 1
        assert ('check_stack: FAILED: mmcv 2.1.0 was compiled without CUDA '
                'ops; rebuild it with CUDA ops: MMLOCAT_MMCV=cuda') in (
                    proc.stderr)
