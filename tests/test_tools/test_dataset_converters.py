"""The thin dataset CLIs in tools/dataset_converters/."""
import json
import os
import os.path as osp
import runpy
import subprocess
import sys

import pytest

from mmlocat.testing import generate


def _run(repo_root, script, argv, monkeypatch):
    path = osp.join(repo_root, 'tools', 'dataset_converters', script)
    monkeypatch.setattr(sys, 'argv', [path] + argv)
    runpy.run_path(path, run_name='__main__')


def test_make_tiny_datasets(repo_root, tmp_path, monkeypatch, capsys):
    root = str(tmp_path / 'tiny')
    argv = [
        '--kinds', 'pascal_context', 'imagenet', '--root', root, '--num-train',
        '1', '--num-val', '1', '--size', '32', '32'
    ]
    _run(repo_root, 'make_tiny_datasets.py', argv, monkeypatch)
    out = capsys.readouterr().out
    voc = osp.join(root, 'VOCdevkit', 'VOC2010')
    assert f'data_root: {voc}' in out
    assert osp.isfile(
        osp.join(voc, 'ImageSets', 'SegmentationContext', 'val.txt'))
    assert osp.isfile(osp.join(root, 'imagenet', 'meta', 'train.txt'))


@pytest.mark.e2e
def test_readme_command_on_a_fresh_root(repo_root, tmp_path, subprocess_env):
    """README.md "Tools": every kind into one new root, in a fresh process
    (COCO-Object shared COCO's folder and stopped the run); a second run
    with the same arguments rewrites nothing and succeeds."""
    root = str(tmp_path / 'tiny')
    command = [
        sys.executable, 'tools/dataset_converters/make_tiny_datasets.py',
        '--root', root
    ]
    for _ in range(2):
        proc = subprocess.run(
            command,
            cwd=repo_root,
            env=subprocess_env,
            capture_output=True,
            text=True)
        assert proc.returncode == 0, proc.stderr[-3000:]
    # COCO-Object is derived inside the folders of its sources
    for source in ('coco', 'coco_stuff164k'):
        for split in ('train2017', 'val2017'):
            folder = osp.join(root, source, 'coco_object', split)
            assert any(n.endswith('.png') for n in os.listdir(folder)), folder
    assert osp.isfile(
        osp.join(root, 'coco', 'annotations', 'instances_val2017.json'))
    assert 'coco_object:' in proc.stdout


def test_make_ov_coco_and_lvis(repo_root, tmp_path, monkeypatch, capsys):
    generate('coco', str(tmp_path / 'coco'), 2, 1, (32, 32))
    generate('lvis', str(tmp_path / 'lvis'), 2, 1, (32, 32))
    out_dir = tmp_path / 'out'
    _run(repo_root, 'make_ov_coco.py',
         [str(tmp_path / 'coco' / 'annotations'),
          str(out_dir)], monkeypatch)
    _run(repo_root, 'make_ov_lvis.py',
         [str(tmp_path / 'lvis' / 'annotations'),
          str(out_dir)], monkeypatch)
    out = capsys.readouterr().out
    for name in ('instances_train2017_seen_2.json',
                 'instances_val2017_all_2.json', 'lvis_v1_train_norare.json'):
        assert name in out
        with open(out_dir / name) as f:
            assert json.load(f)['categories']


@pytest.mark.parametrize('script,missing', [
    ('make_ov_coco.py', 'instances_train2017.json'),
    ('make_ov_lvis.py', 'lvis_v1_train.json'),
])
def test_ov_split_tools_end_in_one_error_line(repo_root, tmp_path, script,
                                              missing, monkeypatch, capsys):
    """A folder without the annotation file: one ``NAME: error:`` line
    naming the file, exit 2, no traceback, nothing written."""
    out_dir = tmp_path / 'out'
    with pytest.raises(SystemExit) as exit_info:
        _run(repo_root, script, [str(tmp_path), str(out_dir)], monkeypatch)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f'{script}: error: ') and missing in err, err
    assert len(err.strip().splitlines()) == 1
    assert not out_dir.exists() or not os.listdir(out_dir)
