"""Caption pairs from webdataset tar shards (``WebDatasetCaptionDataset``)."""
import io
import json
import os
import os.path as osp
import pickle
import shutil
import sys
import tarfile

import numpy as np
import pytest
import torch
import webdataset as wds
from mm_warnings import logged_warnings
from mmcv.transforms import LoadImageFromFile
from PIL import Image

import mmlocat  # noqa: F401
from mmlocat.datasets import (CocoCaptionDataset, TsvCaptionDataset,
                              WebDatasetCaptionDataset)
from mmlocat.testing import generate


@pytest.fixture(scope='module')
def captions(tmp_path_factory):
    return generate(
        'captions',
        str(tmp_path_factory.mktemp('cap')),
        6,
        3, (32, 32),
        shards=2)


def _shards(paths, **kwargs):
    return WebDatasetCaptionDataset(
        data_root=paths['data_root'],
        ann_file=paths['train_shards'],
        split_lines=True,
        **kwargs)


def test_coco_tsv_and_shards_give_the_same_pairs(captions):
    root = captions['data_root']
    coco = CocoCaptionDataset(
        data_root=root,
        ann_file=captions['train_ann_file'],
        data_prefix=dict(img_path=captions['train_prefix']))
    tsv = TsvCaptionDataset(data_root=root, ann_file=captions['train_tsv'])
    shards = _shards(captions)
    assert len(coco) == len(tsv) == len(shards) == 12  # 6 images x 2
    load = LoadImageFromFile()
    for a, b, c in zip(coco, tsv, shards):
        assert a['caption'] == b['caption'] == c['caption']
        assert a['img_id'] == b['img_id'] == c['img_id']
        assert osp.samefile(a['img_path'], b['img_path'])
        # the shard's member is the same file: same pixels as the loader's
        assert c['img_path'].endswith(osp.basename(a['img_path']))
        np.testing.assert_array_equal(
            c['img'],
            load(dict(img_path=a['img_path']))['img'])
        assert c['img_shape'] == c['ori_shape'] == (32, 32)
    grouped = _shards(captions, group_by_image=True)
    assert [g['captions'] for g in grouped
            ] == [[coco[2 * i]['caption'], coco[2 * i + 1]['caption']]
                  for i in range(6)]
    # webdataset's own (iterable) reader sees the same samples
    urls = osp.join(root, captions['train_shards'])
    ref = list(wds.WebDataset(urls, shardshuffle=False))
    assert [s['__key__'] for s in ref] == [f'{i:06d}' for i in range(6)]
    assert [s['txt'].decode().split('\n')
            for s in ref] == [g['captions'] for g in grouped]
    # open_clip's reading (the whole key.txt one caption) is the default
    whole = WebDatasetCaptionDataset(
        data_root=root, ann_file=captions['val_shards'])
    assert len(whole) == 3
    assert whole[0]['caption'] == _joined_val_captions(captions)


def _joined_val_captions(captions):
    val = CocoCaptionDataset(
        data_root=captions['data_root'],
        ann_file=captions['val_ann_file'],
        data_prefix=dict(img_path=captions['val_prefix']),
        group_by_image=True)
    return '\n'.join(val[0]['captions'])


def test_pipeline_runs_without_a_file_loader(captions):
    pipeline = [
        dict(type='mmpretrain.Resize', scale=(16, 16)),
        dict(type='mmlocat.TokenizeCaption', model_name='ViT-B-16'),
        dict(type='mmpretrain.PackInputs', algorithm_keys=['text_tokens'])
    ]
    item = _shards(captions, pipeline=pipeline)[0]
    assert item['inputs'].shape == (3, 16, 16)
    assert item['data_samples'].text_tokens.dtype == torch.long
    with pytest.raises(ValueError, match=r"remove \['LoadImageFromFile'\]"):
        _shards(captions, pipeline=[dict(type='LoadImageFromFile')])


def test_shipped_recipe_reads_shards(captions, tmp_path, repo_root):
    """The shipped LaSt-CLIP B/16 recipe's shard dataset (CC3M by default)
    pointed at the generated shards, and a pickled copy (spawned data
    workers) reads the same."""
    from mmengine.config import Config
    from mmengine.registry import init_default_scope

    from mmlocat.registry import DATASETS
    config = tmp_path / 'shards.py'
    shipped = osp.join(repo_root, 'configs/last/clip_last-b16_8xb64_cc3m.py')
    config.write_text(f"""_base_ = {shipped!r}
train_dataloader = dict(
    dataset=dict(
        data_root={captions['data_root']!r},
        ann_file={captions['train_shards']!r}))
""")
    init_default_scope('mmpretrain')
    data = DATASETS.build(
        Config.fromfile(str(config)).train_dataloader.dataset)
    item = data[0]
    assert item['inputs'].shape == (3, 224, 224)
    assert item['data_samples'].text_tokens.shape == (77, )
    copy = pickle.loads(pickle.dumps(data))
    assert copy.get_data_info(3)['caption'] == data.get_data_info(3)['caption']


def _write(path, samples):
    with wds.TarWriter(str(path)) as sink:
        for sample in samples:
            sink.write(sample)
    return str(path)


def _jpg(captions):
    with open(osp.join(captions['data_root'], 'train2017/000000.jpg'),
              'rb') as f:
        return f.read()


def _png():
    buf = io.BytesIO()
    Image.fromarray(np.zeros((8, 12, 3), np.uint8)).save(buf, format='PNG')
    return buf.getvalue()


def test_missing_images_refused_or_skipped_with_a_count(tmp_path, captions):
    jpg = _jpg(captions)
    shard = _write(tmp_path / 'part.tar', [
        dict(__key__='a', jpg=jpg, txt='a red star'),
        dict(__key__='b', txt='no picture'),
        dict(__key__='c', png=_png(), txt='a png member'),
    ])
    with pytest.raises(
            FileNotFoundError,
            match=r"1 of 3 images not found.*part.tar/b.<no image: \['txt'\]>"
            r".*missing_images='skip'"):
        WebDatasetCaptionDataset(ann_file=shard)
    with logged_warnings() as warned:
        data = WebDatasetCaptionDataset(ann_file=shard, missing_images='skip')
    assert [d['caption'] for d in data] == ['a red star', 'a png member']
    assert data[1]['img'].shape == (8, 12, 3)
    assert any('1 of 3 images not found' in m and '2 images kept' in m
               for m in warned), warned


def test_empty_captions_and_bad_shards_are_errors(tmp_path, captions):
    jpg = _jpg(captions)
    shard = _write(tmp_path / 'empty.tar', [
        dict(__key__='a', jpg=jpg, txt='fine'),
        dict(__key__='b', jpg=jpg, txt='  \n'),
    ])
    with pytest.raises(ValueError, match="empty caption at empty.tar key 'b'"):
        WebDatasetCaptionDataset(ann_file=shard)
    with pytest.raises(ValueError, match="empty caption at empty.tar key 'b'"):
        WebDatasetCaptionDataset(ann_file=shard, split_lines=True)
    with pytest.raises(
            FileNotFoundError, match=r'1 webdataset shard.*gone-000001.tar'):
        WebDatasetCaptionDataset(
            ann_file=str(tmp_path / 'empty.tar::') +
            str(tmp_path / 'gone-{000001..000001}.tar'))
    bad = tmp_path / 'bad.tar'
    bad.write_bytes(b'not a tar file' * 100)
    with pytest.raises(ValueError, match='bad.tar is not an uncompressed tar'):
        WebDatasetCaptionDataset(ann_file=str(bad))


def test_clear_error_without_webdataset(tmp_path, captions, monkeypatch):
    monkeypatch.setitem(sys.modules, 'webdataset', None)
    with pytest.raises(ImportError, match='pip install webdataset'):
        _shards(captions)
    with pytest.raises(ImportError, match='pip install webdataset'):
        generate('captions', str(tmp_path / 'c'), 2, 1, (16, 16), shards=1)
    # without shards the generator needs no webdataset
    assert 'train_shards' not in generate('captions', str(tmp_path / 'd'), 2,
                                          1, (16, 16))


def test_sample_without_caption_is_named_or_skipped(tmp_path, captions):
    jpg = _jpg(captions)
    shard = _write(tmp_path / 'notxt.tar', [
        dict(__key__='a', jpg=jpg, txt='a red star'),
        dict(__key__='b', jpg=jpg),
    ])
    with pytest.raises(
            ValueError,
            match=r"1 sample\(s\) of .*notxt.tar have no caption \(key.txt\) "
            r"member, e.g. \[\".*notxt.tar key 'b' \(members \['jpg'\]\)\"\]; "
            r"fix the shards or set missing_captions='skip'"):
        WebDatasetCaptionDataset(ann_file=shard)
    with logged_warnings() as warned:
        data = WebDatasetCaptionDataset(
            ann_file=shard, missing_captions='skip')
    assert [d['caption'] for d in data] == ['a red star']
    assert any("notxt.tar key 'b'" in m and '1 caption(s) kept' in m
               for m in warned), warned
    with pytest.raises(ValueError, match='missing_captions must be one of'):
        WebDatasetCaptionDataset(ann_file=shard, missing_captions='keep')


def test_non_utf8_caption_is_named_by_member_and_line(tmp_path, captions):
    shard = _write(tmp_path / 'latin.tar', [
        dict(
            __key__='a',
            jpg=_jpg(captions),
            txt='a red star\na caf\xe9 sign'.encode('latin-1')),
    ])
    with pytest.raises(
            ValueError,
            match=r"latin.tar/a.txt:2: bytes b'\\xe9' are not "
            'valid utf-8'):
        WebDatasetCaptionDataset(ann_file=shard)
    data = WebDatasetCaptionDataset(
        ann_file=shard, encoding='latin-1', split_lines=True)
    assert [d['caption'] for d in data] == ['a red star', 'a caf\xe9 sign']


def test_member_that_does_not_decode_is_named(tmp_path, captions):
    from mmlocat.datasets import CheckedDataset, DataFileError
    shard = _write(tmp_path / 'bad.tar', [
        dict(__key__='a', jpg=_jpg(captions), txt='fine'),
        dict(__key__='b', jpg=b'', txt='an empty member'),
    ])
    data = WebDatasetCaptionDataset(ann_file=shard)
    info = data.get_data_info(1)  # the location only: nothing decoded
    assert 'img' not in info and info['img_path'] == f'{shard}/b.jpg'
    with pytest.raises(
            DataFileError, match=f'{shard}/b.jpg: empty file \\(0 bytes\\)'):
        data[1]
    with pytest.raises(
            DataFileError,
            match=f'WebDatasetCaptionDataset sample 1: {shard}/'
            'b.jpg: empty file'):
        CheckedDataset(data)[1]


def _cut(shard, at):
    """Keep the first ``at`` bytes of a shard (an interrupted copy)."""
    with open(shard, 'rb') as f:
        data = f.read()
    with open(shard, 'wb') as f:
        f.write(data[:at])


def _members(shard):
    with tarfile.open(shard) as tar:
        return {m.name: m for m in tar}


def _three(tmp_path, captions, name):
    jpg = _jpg(captions)
    return _write(
        tmp_path / name,
        [dict(__key__=k, jpg=jpg, txt=f'caption {k}') for k in 'abc'])


def test_truncated_shard_is_named_wherever_it_is_cut(tmp_path, captions):
    cases = [
        # at a member boundary: tarfile reads a shorter archive
        ('boundary.tar', 'b.txt', lambda m: m.offset_data + 512,
         r"boundary.tar is truncated after member 'b.txt' "
         r'\(byte \d+\): a tar shard ends with 1024 zero bytes, the '
         r'file has nothing there, so samples after it may be lost; '
         'copy or download the shard again'),
        # inside a member's data
        ('member.tar', 'c.jpg', lambda m: m.offset_data + 10,
         r"member.tar is truncated inside member 'c.jpg': its data "
         r'ends at byte \d+, the file has \d+ bytes'),
        # inside the header of c.txt (was: "no caption member" for c)
        ('header.tar', 'c.txt', lambda m: m.offset + 100,
         r"header.tar is truncated after member 'c.jpg' .*the file "
         r'has 100 bytes that are no complete tar header'),
    ]
    for name, member, at, match in cases:
        shard = _three(tmp_path, captions, name)
        _cut(shard, at(_members(shard)[member]))
        with pytest.raises(ValueError, match=match):
            WebDatasetCaptionDataset(ann_file=shard)
    # a whole shard still loads
    data = WebDatasetCaptionDataset(
        ann_file=_three(tmp_path, captions, 'whole.tar'))
    assert [d['caption'] for d in data] == [f'caption {k}' for k in 'abc']


def test_sample_count_is_checked_against_the_shard_record(tmp_path, captions):
    # the generator writes img2dataset's record next to each shard
    record = osp.join(captions['data_root'], 'shards',
                      'train-000000_stats.json')
    with open(record) as f:
        assert json.load(f)['successes'] == 3
    # a complete tar with fewer samples than its record says
    shard = _write(tmp_path / '00000.tar',
                   [dict(__key__=k, jpg=_jpg(captions), txt=k) for k in 'ab'])
    stats = tmp_path / '00000_stats.json'
    stats.write_text(json.dumps(dict(count=4, successes=3)))
    with pytest.raises(
            ValueError,
            match=r"00000.tar holds 2 samples, its record .*00000_stats.json "
            r"says 3 \('successes'\): the shard is incomplete"):
        WebDatasetCaptionDataset(ann_file=shard)
    stats.write_text('{"count": 4')
    with pytest.raises(
            ValueError,
            match=r"00000_stats.json: not an img2dataset shard record"):
        WebDatasetCaptionDataset(ann_file=shard)
    stats.write_text(json.dumps(dict(count=4, successes=2)))
    assert len(WebDatasetCaptionDataset(ann_file=shard)) == 2


def test_relative_data_root(captions, tmp_path, monkeypatch, repo_root):
    """Issue 36: a relative data_root (every shipped CC3M recipe has one)
    was joined twice and every image reported missing."""
    from mmengine.config import Config

    from mmlocat.datasets.dataset_check import check_config_data
    work = tmp_path / 'work'
    shutil.copytree(captions['data_root'], work / 'data' / 'cc3m')
    monkeypatch.chdir(work)
    data = _shards(dict(captions, data_root='data/cc3m'))
    assert len(data) == 12
    assert data.get_data_info(0)['img_path'] == (
        'data/cc3m/shards/train-000000.tar/000000.jpg')
    assert data[0]['img'].shape == (32, 32, 3)
    # the checker builds the shipped recipe the same way
    cfg = Config.fromfile(
        osp.join(repo_root, 'configs/last/clip_last-b16_8xb64_cc3m.py'))
    cfg.merge_from_dict({
        'train_dataloader.dataset.ann_file':
        captions['train_shards'],
        'train_dataloader.num_workers':
        0
    })
    assert cfg.train_dataloader.dataset.data_root == 'data/cc3m'
    report, = check_config_data(cfg, progress=False)
    assert (report.samples, report.ok) == (6, True), report.format()
    assert os.getcwd() == str(work)
