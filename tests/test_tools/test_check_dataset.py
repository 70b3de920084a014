"""tools/misc/check_dataset.py, run in-process: exit 0 on clean data,
1 with counts and names on faults, 2 with one line on a bad config."""
import json
import os.path as osp

import pytest
from helpers.faults import plant
from helpers.harness import run_tool

from mmlocat.testing import generate
from mmlocat.testing.seg_writers import ade20k_file

pytestmark = pytest.mark.e2e

TOOL = 'tools/misc/check_dataset.py'
ADE_CONFIG = 'configs/locat/upernet_locat-t_ade20k.py'
CORLOC_VOC07 = 'configs/last/corloc_dino-s_voc07.py'


def ade_args(root, *extra):
    return [
        ADE_CONFIG, '--cfg-options',
        f'train_dataloader.dataset.data_root={root}',
        f'val_dataloader.dataset.data_root={root}', *extra
    ]


@pytest.fixture
def ade(make_ade20k):
    return make_ade20k(3, 2)


def _check_voc07_with_first_xml(tmp_path, edit):
    """check_dataset.py on the CorLoc VOC07 config over a tiny VOC2007
    whose first annotation file ``edit`` rewrote; (process, that file)."""
    voc = generate(
        'pascal_voc', str(tmp_path / 'voc'), 2, 1, (32, 48), year=2007)
    xml = osp.join(voc['data_root'], 'Annotations', '2007_000000.xml')
    with open(xml) as f:
        text = f.read()
    with open(xml, 'w') as f:
        f.write(edit(text))
    proc = run_tool(
        TOOL, CORLOC_VOC07, '--split', 'test', '--num-workers', '0',
        '--cfg-options', f'test_dataloader.dataset.data_root='
        f'{voc["data_root"]}', 'test_dataloader.dataset.ann_file='
        'ImageSets/Main/trainval.txt',
        'test_dataloader.dataset.expected_num_images=None')
    return proc, xml


def test_clean_then_faulty(ade, tmp_path):
    proc = run_tool(TOOL, *ade_args(ade))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == ('train ADE20KDataset: 3 samples, 6 files '
                                   'checked: no fault')
    assert '3/3' in proc.stderr  # the progress bar
    image = plant('empty', ade20k_file(ade, 'img', 2, 'val'))
    label = plant('half_label', ade20k_file(ade, 'ann', 1, 'val'))
    out = str(tmp_path / 'report.json')
    proc = run_tool(TOOL, *ade_args(ade), '--split', 'val', '--out', out)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == [
        'val ADE20KDataset: 2 samples, 4 files checked: 2 fault(s) empty 1, '
        'size_mismatch 1',
        '  empty (1):',
        f'    {image}: empty file (0 bytes)',
        '  size_mismatch (1):',
        f'    {label}: label map is 16x24 (HxW) but its image '
        f'{ade20k_file(ade, "img", 1, "val")} is 32x48',
    ]
    with open(out) as f:
        report, = json.load(f)
    assert report['counts'] == dict(empty=1, size_mismatch=1)
    assert [f['path'] for f in report['faults']] == [label, image]


def test_voc_size_through_the_corloc_config(tmp_path):
    proc, _ = _check_voc07_with_first_xml(
        tmp_path,
        lambda t: t.replace('<width>48</width>', '<width>64</width>'))
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert 'size_mismatch 1' in proc.stdout
    assert ('2007_000000.jpg: the annotation gives 32x64 (HxW), the '
            'decoded image is 32x48') in proc.stdout


@pytest.mark.parametrize('args, message', [
    (['no/cfg.py'], 'no/cfg.py'),
    ([
        ADE_CONFIG, '--cfg-options', 'train_dataloader.dataset.data_root='
        '/no/such/root'
    ], '/no/such/root'),
])
def test_bad_config_or_root_is_one_line(args, message):
    proc = run_tool(TOOL, *args)
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith('check_dataset.py: error: ') and message in last
    assert 'Traceback' not in proc.stderr


def test_box_outside_its_image_through_the_corloc_config(tmp_path):
    """xmax=5000 on a 48 px wide image: the CorLoc data is refused, naming
    the file, the image id and the box."""
    import re
    proc, xml = _check_voc07_with_first_xml(
        tmp_path,
        lambda t: re.sub(r'<xmax>[\d.]+</xmax>', '<xmax>5000</xmax>', t, 1))
    assert proc.returncode == 2, proc.stderr[-3000:]
    line, = proc.stderr.strip().splitlines()[-1:]
    assert (f"{xml} (image id '2007_000000'): 1 box(es) outside the 32x48 "
            '(HxW) image') in line
    assert ', 5000.0, ' in line
