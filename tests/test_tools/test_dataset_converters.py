"""The thin dataset CLIs in tools/dataset_converters/."""
import json
import os
import os.path as osp

import pytest
from helpers.harness import run_tool

from mmlocat.testing import generate

TOOLS = 'tools/dataset_converters'


def test_make_tiny_datasets(tmp_path):
    root = str(tmp_path / 'tiny')
    argv = [
        '--kinds', 'pascal_context', 'imagenet', '--root', root, '--num-train',
        '1', '--num-val', '1', '--size', '32', '32'
    ]
    proc = run_tool(f'{TOOLS}/make_tiny_datasets.py', *argv)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    voc = osp.join(root, 'VOCdevkit', 'VOC2010')
    assert f'data_root: {voc}' in out
    assert osp.isfile(
        osp.join(voc, 'ImageSets', 'SegmentationContext', 'val.txt'))
    assert osp.isfile(osp.join(root, 'imagenet', 'meta', 'train.txt'))


@pytest.mark.e2e
def test_readme_command_on_a_fresh_root(tmp_path):
    """README.md "Tools": every kind into one new root (COCO-Object shared
    COCO's folder and stopped the run); a second run with the same
    arguments rewrites nothing and succeeds."""
    root = str(tmp_path / 'tiny')
    for _ in range(2):
        proc = run_tool(f'{TOOLS}/make_tiny_datasets.py', '--root', root)
        assert proc.returncode == 0, proc.stderr[-3000:]
    # COCO-Object is derived inside the folders of its sources
    for source in ('coco', 'coco_stuff164k'):
        for split in ('train2017', 'val2017'):
            folder = osp.join(root, source, 'coco_object', split)
            assert any(n.endswith('.png') for n in os.listdir(folder)), folder
    assert osp.isfile(
        osp.join(root, 'coco', 'annotations', 'instances_val2017.json'))
    assert 'coco_object:' in proc.stdout


def test_make_ov_coco_and_lvis(tmp_path):
    generate('coco', str(tmp_path / 'coco'), 2, 1, (32, 32))
    generate('lvis', str(tmp_path / 'lvis'), 2, 1, (32, 32))
    out_dir = tmp_path / 'out'
    out = ''
    for kind in ('coco', 'lvis'):
        proc = run_tool(f'{TOOLS}/make_ov_{kind}.py',
                        tmp_path / kind / 'annotations', out_dir)
        assert proc.returncode == 0, proc.stderr[-3000:]
        out += proc.stdout
    for name in ('instances_train2017_seen_2.json',
                 'instances_val2017_all_2.json', 'lvis_v1_train_norare.json'):
        assert name in out
        with open(out_dir / name) as f:
            assert json.load(f)['categories']


@pytest.mark.parametrize('script,missing', [
    ('make_ov_coco.py', 'instances_train2017.json'),
    ('make_ov_lvis.py', 'lvis_v1_train.json'),
])
def test_ov_split_tools_end_in_one_error_line(tmp_path, script, missing):
    """A folder without the annotation file: one ``NAME: error:`` line
    naming the file, exit 2, no traceback, nothing written."""
    out_dir = tmp_path / 'out'
    proc = run_tool(f'{TOOLS}/{script}', tmp_path, out_dir)
    assert proc.returncode == 2
    err = proc.stderr
    assert err.startswith(f'{script}: error: ') and missing in err, err
    assert len(err.strip().splitlines()) == 1
    assert not out_dir.exists() or not os.listdir(out_dir)
