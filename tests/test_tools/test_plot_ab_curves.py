"""tools/analysis_tools/plot_ab_curves.py on mmengine-format scalar logs."""
import json

from helpers.harness import run_tool


def _write_log(work_dir, losses, top1):
    run = work_dir / '20260101_000000' / 'vis_data'
    run.mkdir(parents=True)
    rows = [
        dict(lr=1e-3, loss=v, step=5 * (i + 1), iter=5 * (i + 1))
        for i, v in enumerate(losses)
    ]
    rows += [{'accuracy/top1': v, 'step': i + 1} for i, v in enumerate(top1)]
    (run /
     '20260101_000000.json').write_text('\n'.join(json.dumps(r)
                                                  for r in rows) + '\n')
    (run / 'scalars.json').write_text('')  # mmengine's copy; ignored


TOOL = 'tools/analysis_tools/plot_ab_curves.py'


def test_plots_pairs_and_reports(tmp_path):
    _write_log(tmp_path / 'a', [2.3, 2.2, 2.1, 2.0, 1.9, 1.8], [20., 30.])
    _write_log(tmp_path / 'b', [2.3, 2.3, 2.2, 2.2, 2.1, 2.1], [10., 25.])
    out = tmp_path / 'curves.png'
    proc = run_tool(TOOL, f'A={tmp_path / "a"}', f'B={tmp_path / "b"}',
                    '--out', out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = proc.stdout
    assert 'A: final loss 2.0000 (mean of the last 5 logs)' in text
    assert 'top-1 per epoch [10.0, 25.0]' in text
    assert out.stat().st_size > 1000


def test_missing_log_is_an_error(tmp_path):
    proc = run_tool(TOOL, f'A={tmp_path}', '--out', tmp_path / 'x.png')
    assert proc.returncode == 1
    assert 'FileNotFoundError: no mmengine scalar log' in proc.stderr
