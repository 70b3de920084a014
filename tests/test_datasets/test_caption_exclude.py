"""CocoCaptionDataset(exclude_ids=...): train on COCO Captions without the
images of an evaluation set (LVIS v1 val uses COCO's image ids)."""
import json
import logging

import pytest
from mmengine.logging import MMLogger
# the COCO reader of the caption tests
from test_captions import _coco

import mmlocat  # noqa: F401
from mmlocat.datasets.captions import read_image_ids
from mmlocat.testing import generate


@pytest.fixture(scope='module')
def coco(tmp_path_factory):
    """6 captioned images (ids 0-5), 2 captions each."""
    return generate('captions', str(tmp_path_factory.mktemp('exclude')), 6, 3,
                    (32, 32))


def _logged(fn):
    logger = MMLogger.get_current_instance()
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger.addHandler(handler)
    try:
        result = fn()
    finally:
        logger.removeHandler(handler)
    return result, [r.getMessage() for r in records]


def _lvis_val(path, ids):
    """An LVIS-format file whose images are ``ids`` (COCO ids)."""
    with open(path, 'w') as f:
        json.dump(
            dict(
                images=[dict(id=i, coco_url=f'x/{i:012d}.jpg') for i in ids],
                annotations=[],
                categories=[]), f)
    return str(path)


def test_excluded_images_are_dropped_and_counted(coco, tmp_path):
    full = _coco(coco, group_by_image=True)
    names = [item['img_path'] for item in full]
    lvis = _lvis_val(tmp_path / 'lvis_v1_val.json', [1, 4, 999])
    data, messages = _logged(lambda: _coco(coco, exclude_ids=lvis))
    kept = {item['img_path'] for item in data}
    assert kept == set(names) - {names[1], names[4]}
    assert len(data) == 2 * 4  # 2 captions per kept image
    line, = [m for m in messages if 'left out' in m]
    assert 'left out 2 of 6 images listed in' in line
    assert 'lvis_v1_val.json' in line and '4 images kept' in line
    # the same from a list or a .txt of ids
    txt = tmp_path / 'ids.txt'
    txt.write_text('1\n\n4\n')
    for spec in ([1, 4], str(txt)):
        assert {i['img_path'] for i in _coco(coco, exclude_ids=spec)} == kept


def test_a_list_that_matches_nothing_is_an_error(coco, tmp_path):
    lvis = _lvis_val(tmp_path / 'other.json', [1000, 1001])
    with pytest.raises(ValueError, match='other.json matches no image of'):
        _coco(coco, exclude_ids=lvis)
    with pytest.raises(ValueError, match=r'exclude_ids \(0 ids\) matches no'):
        _coco(coco, exclude_ids=[])


def test_bad_id_lists(tmp_path):
    with pytest.raises(FileNotFoundError, match='nowhere.json'):
        read_image_ids(str(tmp_path / 'nowhere.json'))
    bad = tmp_path / 'bad.txt'
    bad.write_text('12\nabc\n')
    with pytest.raises(ValueError, match='one integer image id a line'):
        read_image_ids(str(bad))
    odd = tmp_path / 'odd.json'
    odd.write_text(json.dumps(dict(annotations=[])))
    with pytest.raises(ValueError, match="no 'images'"):
        read_image_ids(str(odd))
    with pytest.raises(ValueError, match='must be integers'):
        read_image_ids(['1', 2])
    odd.write_text(json.dumps([1, 2.5]))
    with pytest.raises(ValueError, match='must be integers'):
        read_image_ids(str(odd))
