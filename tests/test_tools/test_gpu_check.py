"""tools/analysis_tools/gpu_check.py: the smoke test of the GPU check (CPU,
tiny shapes), in the GPU machine's conditions: no compiled mmcv ops, no
mmseg / mmdet / open_clip."""
import os.path as osp

import pytest
from helpers.harness import run_tool

pytestmark = pytest.mark.e2e

# What the GPU machine lacks, made unimportable before the script runs.
RUN = """
import runpy, sys
for name in ('mmcv._ext', 'mmseg', 'mmdet', 'open_clip'):
    sys.modules[name] = None
sys.argv = ['gpu_check.py'] + sys.argv[1:]
runpy.run_path({script!r}, run_name='__main__')
"""


def test_gpu_check_quick_on_cpu(repo_root, tmp_path):
    script = osp.join(repo_root, 'tools', 'analysis_tools', 'gpu_check.py')
    runner = tmp_path / 'gpu_check_without_hosts.py'
    runner.write_text(RUN.format(script=script))
    proc = run_tool(
        str(runner),
        '--device',
        'cpu',
        '--quick',
        isolate='hides mmcv ops and the hosts from the imports '
        '(sys.modules), which only a fresh process can undo',
        timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    header = next(i for i, line in enumerate(lines)
                  if line.startswith('check |'))
    rows = [
        line.split(' | ') for line in lines[header + 2:]
        if line.count(' | ') >= 13
    ]
    cells = [[c.strip() for c in row] for row in rows]
    exact = [r for r in cells if r[0] == 'exact']
    # 1 size x 2 register counts x 3 dtypes x 3 kernels, all within bounds.
    assert len(exact) == 18
    assert {(r[2], r[3], r[4])
            for r in exact} == {(regs, dtype, impl)
                                for regs in ('0', '4')
                                for dtype in ('fp32', 'bf16', 'fp16')
                                for impl in ('dense', 'chunked', 'flex')}
    assert all(r[7] == 'ok' for r in exact)
    for r in exact:
        if r[3] == 'fp32' and r[4] != 'dense':
            assert float(r[5]) <= 1e-5  # float32 round-off
            if r[4] == 'chunked':
                assert float(r[6]) <= 1e-5
    cost = {(r[0], r[4]): r for r in cells if r[0] in ('train', 'infer')}
    assert set(cost) == {('train', 'vit'), ('train', 'chunked'),
                         ('train', 'dense'), ('infer', 'vit'),
                         ('infer', 'chunked'), ('infer', 'dense')}
    for r in cost.values():
        assert float(r[8]) > 0 and float(r[10]) > 0  # ms and x time
    assert 'flex compilations: 0, failed: 0; 0 failing rows' in proc.stdout
