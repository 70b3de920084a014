"""tools/dataset_converters/coco20k.py and coco_object.py."""
import gzip
import json
import os.path as osp

import pytest
from helpers.harness import run_tool

from mmlocat.datasets.coco20k import make_coco20k

LOST_LIST = osp.join(
    osp.dirname(osp.dirname(osp.abspath(__file__))), 'reference_files', 'LOST',
    'coco_20k_filenames.txt.gz')


def _coco(path, names):
    images = [
        dict(id=i + 1, file_name=n, height=8, width=8)
        for i, n in enumerate(names)
    ]
    anns = [
        dict(
            id=1,
            image_id=1,
            category_id=1,
            bbox=[0, 0, 4, 4],
            iscrowd=0,
            area=16.),
        dict(
            id=2,
            image_id=2,
            category_id=1,
            bbox=[0, 0, 2, 2],
            iscrowd=1,
            area=4.),
        dict(
            id=3,
            image_id=3,
            category_id=1,
            bbox=[1, 1, 2, 2],
            iscrowd=0,
            area=4.),
    ]
    path.write_text(
        json.dumps(
            dict(
                images=images,
                annotations=anns,
                categories=[dict(id=1, name='person')])))
    return str(path)


def test_make_coco20k_keeps_listed_images(tmp_path):
    ann = _coco(tmp_path / 'train.json', ['a.jpg', 'b.jpg', 'c.jpg'])
    listed = tmp_path / 'list.txt'
    listed.write_text('train2014/b.jpg\n\nc.jpg\n')
    out = str(tmp_path / 'out' / 'coco20k.json')
    summary = make_coco20k(ann, str(listed), out)
    not_lost = summary.pop('not_lost')
    assert 'the list has 2 images and is not LOST' in not_lost
    # b.jpg has only a crowd box: reported, LOST cannot score it
    assert summary == dict(
        images=2, annotations=2, crowd=1, without_boxes=['b.jpg'])
    data = json.load(open(out))
    assert [i['file_name'] for i in data['images']] == ['b.jpg', 'c.jpg']
    assert sorted(a['id'] for a in data['annotations']) == [2, 3]


def test_make_coco20k_errors(tmp_path):
    ann = _coco(tmp_path / 'train.json', ['a.jpg'])
    listed = tmp_path / 'list.txt'
    listed.write_text('a.jpg\nzz.jpg\n' + ''.join(f'm{i}.jpg\n'
                                                  for i in range(12)))
    # every missing image counted, the first ten named
    with pytest.raises(
            ValueError, match=r"13 of the 14 images .* not in .*'zz.jpg'"):
        make_coco20k(ann, str(listed), str(tmp_path / 'o.json'))
    listed.write_text('a.jpg\na.jpg\n')
    with pytest.raises(ValueError, match='lists 1 images twice'):
        make_coco20k(ann, str(listed), str(tmp_path / 'o.json'))
    listed.write_text('\n')
    with pytest.raises(ValueError, match='lists no images'):
        make_coco20k(ann, str(listed), str(tmp_path / 'o.json'))
    with pytest.raises(FileNotFoundError, match='nope.txt'):
        make_coco20k(ann, str(tmp_path / 'nope.txt'), str(tmp_path / 'o'))


def test_lost_list_is_recognised():
    from mmlocat.datasets.coco20k import (LOST_COCO20K_NUM_IMAGES,
                                          check_coco20k_list)
    names = [f'COCO_train2014_{i:012d}.jpg' for i in range(5)]
    assert str(LOST_COCO20K_NUM_IMAGES) in check_coco20k_list(names)
    # LOST's own list (Apache-2.0), committed with its licence
    with gzip.open(LOST_LIST, 'rt') as f:
        listing = f.read()
    names = [osp.basename(n) for n in listing.split()]
    assert len(names) == LOST_COCO20K_NUM_IMAGES
    assert check_coco20k_list(names) is None
    assert check_coco20k_list(names[::-1]) is None  # any order
    assert check_coco20k_list(names[1:]) is not None


@pytest.mark.e2e
def test_tool_reports_list_and_images_without_boxes(tmp_path):
    ann = _coco(tmp_path / 'train.json', ['a.jpg', 'b.jpg', 'c.jpg'])
    listed = tmp_path / 'list.txt'
    listed.write_text('train2014/a.jpg\ntrain2014/b.jpg\n')
    proc = run_tool('tools/dataset_converters/coco20k.py', ann, listed,
                    tmp_path / 'o.json')
    assert proc.returncode == 0, proc.stderr
    assert '2 images, 2 annotations (1 crowd)' in proc.stdout
    assert "is not LOST's coco_20k_filenames.txt (19817 images" in proc.stdout
    assert "1 listed images have no non-crowd box, e.g. ['b.jpg']" in (
        proc.stdout)


@pytest.mark.parametrize('tool', ['coco20k', 'coco_object'])
@pytest.mark.e2e
def test_tools_report_bad_input_in_one_line(tmp_path, tool):
    missing = str(tmp_path / 'missing.json')
    args = [missing, str(tmp_path / 'x.txt'), str(tmp_path / 'o.json')]
    if tool == 'coco_object':
        args = [missing, str(tmp_path / 'out')]
    proc = run_tool(f'tools/dataset_converters/{tool}.py', *args)
    assert proc.returncode == 2
    assert f'{tool}: error:' in proc.stderr and 'missing.json' in proc.stderr
    assert 'Traceback' not in proc.stderr
