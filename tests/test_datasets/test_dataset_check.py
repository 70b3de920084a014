"""The dataset checker (``mmlocat.datasets.dataset_check``) on tiny sets in
the real formats, each fault planted, read through the configs' own
loading transforms (mmseg ADE20K, mmdet COCO and VOC, mmpretrain
captions, webdataset shards)."""
import json
import os
import os.path as osp

import pytest
import webdataset as wds
from helpers.faults import plant, set_exif_orientation, set_label_value
from mmengine.config import Config
from mmengine.registry import init_default_scope
from seg_data import ade_config

import mmlocat  # noqa: F401
from mmlocat.datasets import WebDatasetCaptionDataset
from mmlocat.datasets.dataset_check import (build_split_dataset,
                                            check_config_data, check_dataset)
from mmlocat.testing import generate
from mmlocat.testing.seg_writers import ade20k_file

# the COCO Captions option of the LaSt-CLIP recipe (the default is CC3M)
CAPTION_CONFIG = ('configs/last/'
                  'clip_last-b16_8xb64_coco-caption-no-lvis-val.py')


def names(report, kind):
    return sorted(
        osp.basename(f.path) for f in report.faults if f.kind == kind)


@pytest.fixture
def ade(make_ade20k):
    return make_ade20k(8, 2)


def test_clean_data_has_no_fault(ade, repo_root):
    reports = check_config_data(
        ade_config(repo_root, ade), ('train', 'val'), progress=False)
    assert [(r.name, r.samples, r.files, r.ok)
            for r in reports] == [('train ADE20KDataset', 8, 16, True),
                                  ('val ADE20KDataset', 2, 4, True)]
    assert reports[0].format().endswith('no fault')


def test_every_planted_fault_is_named(ade, repo_root):
    plant('empty', ade20k_file(ade, 'img', 1))
    plant('truncated', ade20k_file(ade, 'img', 2))
    plant('undecodable', ade20k_file(ade, 'img', 3))
    os.remove(ade20k_file(ade, 'ann', 4))
    plant('half_label', ade20k_file(ade, 'ann', 5))
    # stored 200 is class 199 after reduce_zero_label: not one of 150
    set_label_value(ade20k_file(ade, 'ann', 6), 200)
    set_exif_orientation(ade20k_file(ade, 'img', 7), 6)  # turns 90 degrees
    set_exif_orientation(ade20k_file(ade, 'img', 8), 3)  # turns 180 degrees
    report, = check_config_data(ade_config(repo_root, ade), progress=False)
    assert report.counts() == dict(
        missing=1,
        empty=1,
        undecodable=1,
        truncated=1,
        size_mismatch=2,
        label_out_of_range=1,
        exif_rotated=2)
    assert names(report, 'empty') == ['ADE_train_00000001.jpg']
    assert names(report, 'truncated') == ['ADE_train_00000002.jpg']
    assert names(report, 'undecodable') == ['ADE_train_00000003.jpg']
    assert names(report, 'missing') == ['ADE_train_00000004.png']
    assert names(report, 'size_mismatch') == [
        'ADE_train_00000005.png', 'ADE_train_00000007.png'
    ]
    assert names(report, 'label_out_of_range') == ['ADE_train_00000006.png']
    assert names(report, 'exif_rotated') == [
        'ADE_train_00000007.jpg', 'ADE_train_00000008.jpg'
    ]
    details = {osp.basename(f.path): f.detail for f in report.faults}
    assert details['ADE_train_00000005.png'].startswith(
        'label map is 16x24 (HxW) but its image')
    assert details['ADE_train_00000005.png'].endswith('is 32x48')
    assert 'EXIF orientation 6' in details['ADE_train_00000007.png']
    assert '[199]' in details['ADE_train_00000006.png']
    text = report.format(max_names=1)
    assert text.splitlines()[0] == (
        'train ADE20KDataset: 8 samples, 16 files checked: 9 fault(s) missing '
        '1, empty 1, undecodable 1, truncated 1, size_mismatch 2, '
        'label_out_of_range 1, exif_rotated 2')
    assert '... and 1 more' in text
    # data workers find the same
    parallel, = check_config_data(
        ade_config(repo_root, ade), num_workers=2, progress=False)
    assert parallel.faults == report.faults


def test_nested_datasets_are_checked_once_each(ade, repo_root):
    plant('empty', ade20k_file(ade, 'img', 2))
    cfg = ade_config(repo_root, ade)
    # mmdet's voc0712.py nesting: Repeat(Concat(train, val))
    cfg.train_dataloader.dataset = dict(
        type='RepeatDataset',
        times=3,
        dataset=dict(
            type='ConcatDataset',
            datasets=[
                cfg.train_dataloader.dataset, cfg.val_dataloader.dataset
            ]))
    report = check_dataset(build_split_dataset(cfg, 'train'), progress=False)
    assert (report.name, report.samples) == ('RepeatDataset', 10)
    assert names(report, 'empty') == ['ADE_train_00000002.jpg']


def test_resize_opt_in_is_a_note(ade, repo_root):
    plant('half_label', ade20k_file(ade, 'ann', 1))
    cfg = ade_config(repo_root, ade)
    pipeline = list(cfg.train_dataloader.dataset.pipeline)
    pipeline.insert(2,
                    dict(type='mmlocat.CheckSegMap', size_mismatch='resize'))
    cfg.train_dataloader.dataset.pipeline = pipeline
    report, = check_config_data(cfg, progress=False)
    assert report.ok
    assert [(n.kind, osp.basename(n.path)) for n in report.notes
            ] == [('label_resized', 'ADE_train_00000001.png')]


def _write_config(tmp_path, text):
    path = tmp_path / 'data_cfg.py'
    path.write_text(text)
    return Config.fromfile(str(path))


def _check_coco_config(tmp_path, data_root):
    """check_config_data over mmdet's COCO detection config reading
    ``data_root``."""
    cfg = _write_config(
        tmp_path, "_base_ = 'mmdet::_base_/datasets/coco_detection.py'\n"
        "default_scope = 'mmdet'\n"
        f"train_dataloader = dict(dataset=dict(data_root="
        f"{data_root + '/'!r}))\n")
    return check_config_data(cfg, progress=False)


def test_coco_width_height_against_the_image(tmp_path):
    paths = generate('coco', str(tmp_path / 'coco'), 3, 1, (64, 96))
    ann = osp.join(paths['data_root'], paths['train_ann_file'])
    with open(ann) as f:
        coco = json.load(f)
    coco['images'][1]['width'] = 80
    with open(ann, 'w') as f:
        json.dump(coco, f)
    plant('truncated',
          osp.join(paths['data_root'], 'train2017', '000000000003.jpg'))
    report, = _check_coco_config(tmp_path, paths['data_root'])
    assert report.counts() == dict(truncated=1, size_mismatch=1)
    bad = [f for f in report.faults if f.kind == 'size_mismatch'][0]
    assert bad.path.endswith('000000000002.jpg')
    assert bad.detail == ('the annotation gives 64x80 (HxW), the decoded '
                          'image is 64x96')


def test_voc_size_against_the_image(tmp_path):
    root = str(tmp_path / 'voc')
    voc = generate('pascal_voc', root, 3, 1, (32, 48), year=2007)
    xml = osp.join(voc['data_root'], 'Annotations', '2007_000001.xml')
    with open(xml) as f:
        text = f.read()
    with open(xml, 'w') as f:
        f.write(text.replace('<height>32</height>', '<height>48</height>'))
    cfg = _write_config(
        tmp_path, "_base_ = 'mmdet::_base_/datasets/voc0712.py'\n"
        "default_scope = 'mmdet'\n"
        'test_dataloader = dict(dataset=dict(data_root='
        f"{osp.join(root, 'VOCdevkit') + '/'!r}, "
        "ann_file='VOC2007/ImageSets/Main/train.txt'))\n")
    report, = check_config_data(cfg, ('test', ), progress=False)
    assert report.samples == 3
    assert [(f.kind, osp.basename(f.path), f.detail) for f in report.faults
            ] == [('size_mismatch', '2007_000001.jpg',
                   'the annotation gives 48x48 (HxW), the decoded image is '
                   '32x48')]


def test_captions_long_caption_is_a_note(tmp_path, repo_root):
    paths = generate('captions', str(tmp_path / 'cap'), 3, 1, (32, 32))
    ann = osp.join(paths['data_root'], paths['train_ann_file'])
    with open(ann) as f:
        coco = json.load(f)
    coco['annotations'][0]['caption'] = 'a red star ' * 30
    with open(ann, 'w') as f:
        json.dump(coco, f)
    plant('undecodable',
          osp.join(paths['data_root'], paths['train_prefix'], '000002.jpg'))
    cfg = Config.fromfile(osp.join(repo_root, CAPTION_CONFIG))
    cfg.merge_from_dict({
        'train_dataloader.dataset.data_root':
        paths['data_root'],
        'train_dataloader.dataset.exclude_ids':
        None,
        'train_dataloader.num_workers':
        0
    })
    report, = check_config_data(cfg, progress=False)
    assert report.counts() == dict(undecodable=1)
    assert names(report, 'undecodable') == ['000002.jpg']
    # 90 words + start and end tokens > 77: open_clip truncates it
    assert [n.kind for n in report.notes] == ['caption_truncated']
    assert report.notes[0].path.endswith('000000.jpg')


def test_shard_member_that_does_not_decode(tmp_path):
    shard = str(tmp_path / 'part.tar')
    good = generate('captions', str(tmp_path / 'cap'), 1, 1, (32, 32))
    with open(osp.join(good['data_root'], 'train2017', '000000.jpg'),
              'rb') as f:
        jpg = f.read()
    with wds.TarWriter(shard) as sink:
        sink.write(dict(__key__='a', jpg=jpg, txt='a red star'))
        sink.write(dict(__key__='b', jpg=b'not a jpeg', txt='broken'))
        sink.write(dict(__key__='c', jpg=b'', txt='empty'))
    init_default_scope('mmpretrain')
    report = check_dataset(
        WebDatasetCaptionDataset(ann_file=shard), progress=False)
    assert [(f.kind, f.path)
            for f in report.faults] == [('undecodable', f'{shard}/b.jpg'),
                                        ('empty', f'{shard}/c.jpg')]


def test_folder_or_fifo_in_place_of_an_image_is_a_fault(ade, repo_root):
    """mmseg lists the image folder and leaves out what is no regular
    file: the sample vanished while the checker said "no fault"."""
    folder, fifo = ade20k_file(ade, 'img', 1), ade20k_file(ade, 'img', 2)
    os.remove(folder)
    os.mkdir(folder)
    os.remove(fifo)
    os.mkfifo(fifo)
    report, = check_config_data(ade_config(repo_root, ade), progress=False)
    assert report.samples == 6  # the listing left both out
    assert report.counts() == dict(not_regular=2)
    details = {osp.basename(f.path): f.detail for f in report.faults}
    assert details['ADE_train_00000001.jpg'].startswith(
        'a directory, not a regular file')
    assert details['ADE_train_00000002.jpg'].startswith(
        'a FIFO (named pipe), not a regular file')
    assert details['ADE_train_00000002.jpg'].endswith(
        f'(the image of label map {ade20k_file(ade, "ann", 2)}; the dataset '
        'lists its image folder and leaves this sample out)')


def _alarm(seconds):
    """Fail instead of hanging: SIGALRM interrupts a blocked open()."""
    import signal

    def fail(*_):
        raise TimeoutError(f'no answer within {seconds} s (a FIFO opened?)')

    signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)


def test_fifo_label_map_is_a_fault_and_never_opened(ade, repo_root):
    import signal

    from mmlocat.datasets import CheckedDataset, DataFileError
    label = ade20k_file(ade, 'ann', 1)
    os.remove(label)
    os.mkfifo(label)
    _alarm(60)
    try:
        report, = check_config_data(ade_config(repo_root, ade), progress=False)
        # training's guard stats it before mmseg's loader would block
        data = CheckedDataset(
            build_split_dataset(ade_config(repo_root, ade), 'train'))
        with pytest.raises(
                DataFileError,
                match=f'ADE20KDataset sample 0: {label}: a FIFO '
                r'\(named pipe\), not a regular file'):
            data[0]
    finally:
        signal.alarm(0)
    assert [(f.kind, f.path)
            for f in report.faults] == [('not_regular', label)]


def _corrupt_jpeg(path):
    """Insert 3 bytes after the JPEG's first marker segment (APP0):
    libjpeg skips them with 'Corrupt JPEG data: 3 extraneous bytes'."""
    with open(path, 'rb') as f:
        data = f.read()
    end = 4 + int.from_bytes(data[4:6], 'big')
    with open(path, 'wb') as f:
        f.write(data[:end] + b'\x01\x02\x03' + data[end:])
    return '0x%02x' % data[end + 1]


def test_corrupt_jpeg_that_decodes_is_a_warning_naming_it(
        ade, repo_root, capfd):
    import cv2
    from mm_warnings import logged_warnings

    from mmlocat.datasets import CheckedDataset
    image = ade20k_file(ade, 'img', 1)
    marker = _corrupt_jpeg(image)
    capfd.readouterr()
    assert cv2.imread(image) is not None  # it decodes...
    said = f'Corrupt JPEG data: 3 extraneous bytes before marker {marker}'
    assert said in capfd.readouterr().err  # ...with libjpeg's warning
    report, = check_config_data(ade_config(repo_root, ade), progress=False)
    assert report.ok
    assert [(n.kind, n.path)
            for n in report.notes] == [('corrupt_jpeg', image)]
    assert report.notes[0].detail.startswith(
        f'libjpeg decodes it with "{said}"')
    assert '  warning: corrupt_jpeg (1):' in report.format()
    data = CheckedDataset(
        build_split_dataset(ade_config(repo_root, ade), 'train'))
    with logged_warnings() as warned:
        data[0]
        data[0]  # once per file
    named = [m for m in warned if image in m]
    assert len(named) == 1 and said in named[0], warned


def test_grey_label_map_saved_as_rgb_is_named(ade, repo_root):
    import numpy as np
    from PIL import Image

    from mmlocat.datasets import CheckedDataset, DataFileError
    label = ade20k_file(ade, 'ann', 1)
    grey = np.array(Image.open(label))
    Image.fromarray(np.stack([grey] * 3, axis=-1)).save(label)
    report, = check_config_data(ade_config(repo_root, ade), progress=False)
    assert [(f.kind, f.path)
            for f in report.faults] == [('label_channels', label)]
    assert report.faults[0].detail.startswith(
        'label map has 3 channels (all equal: a grey map saved as RGB)')
    data = CheckedDataset(
        build_split_dataset(ade_config(repo_root, ade), 'train'))
    with pytest.raises(
            DataFileError,
            match=f'ADE20KDataset sample 0: {label}: label map has 3 '
            r'channels \(all equal: a grey map saved as RGB\).*save it as '
            'a one-channel PNG'):
        data[0]


def test_box_outside_its_image_is_a_fault(tmp_path):
    paths = generate('coco', str(tmp_path / 'coco'), 3, 1, (64, 96))
    ann = osp.join(paths['data_root'], paths['train_ann_file'])
    with open(ann) as f:
        coco = json.load(f)
    box = coco['annotations'][0]
    box['bbox'] = [10, 10, 5000, 20]
    with open(ann, 'w') as f:
        json.dump(coco, f)
    report, = _check_coco_config(tmp_path, paths['data_root'])
    assert report.counts() == dict(box_outside=1)
    fault = report.faults[0]
    assert fault.detail == (
        f"image id {box['image_id']}: 1 box(es) outside the 64x96 (HxW) "
        'image, e.g. [[10.0, 10.0, 5010.0, 30.0]] (x1, y1, x2, y2 in '
        'pixels): a wrong annotation or one of another image; fix it')
