"""tools/analysis_tools/plot_ab_curves.py on mmengine-format scalar logs."""
import json
import os.path as osp
import runpy
import sys

import pytest


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


def _run(repo_root, argv, monkeypatch):
    path = osp.join(repo_root, 'tools', 'analysis_tools', 'plot_ab_curves.py')
    monkeypatch.setattr(sys, 'argv', [path] + argv)
    runpy.run_path(path, run_name='__main__')


def test_plots_pairs_and_reports(repo_root, tmp_path, monkeypatch, capsys):
    _write_log(tmp_path / 'a', [2.3, 2.2, 2.1, 2.0, 1.9, 1.8], [20., 30.])
    _write_log(tmp_path / 'b', [2.3, 2.3, 2.2, 2.2, 2.1, 2.1], [10., 25.])
    out = tmp_path / 'curves.png'
    _run(repo_root,
         [f'A={tmp_path / "a"}', f'B={tmp_path / "b"}', '--out',
          str(out)], monkeypatch)
    text = capsys.readouterr().out
    assert 'A: final loss 2.0000 (mean of the last 5 logs)' in text
    assert 'top-1 per epoch [10.0, 25.0]' in text
    assert out.stat().st_size > 1000


def test_missing_log_is_an_error(repo_root, tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match='no mmengine scalar log'):
        _run(repo_root, [f'A={tmp_path}', '--out',
                         str(tmp_path / 'x.png')], monkeypatch)
