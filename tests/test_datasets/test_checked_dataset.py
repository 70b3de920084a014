"""CheckedDataset: a sample that cannot be loaded is named (path, dataset,
index) in one line; skip mode loads another one and records it across data
workers; label maps of another size are refused before mmseg resizes
them. Real mmseg ADE20K datasets and pipelines on generated data."""
import gc
import os
import os.path as osp
import pickle
import re
import textwrap
from itertools import islice

import mmcv
import numpy as np
import pytest
from helpers.faults import plant, set_label_value
from mm_warnings import logged_warnings
from mmengine.registry import init_default_scope
from PIL import Image
from seg_data import ADE_CONFIG, ade_config
from torch.utils.data import DataLoader

import mmlocat  # noqa: F401
from mmlocat.datasets import CheckedDataset, CheckSegMap, DataFileError
from mmlocat.datasets.checked_dataset import checked_dataset_cfg
from mmlocat.testing.seg_writers import ade20k_file


@pytest.fixture
def ade(make_ade20k):
    return make_ade20k(4, 2)


def checked(repo_root, root, split='train', test_mode=False, **kwargs):
    cfg = ade_config(repo_root, root)[f'{split}_dataloader'].dataset
    init_default_scope('mmseg')
    return CheckedDataset(dict(cfg, test_mode=test_mode), **kwargs)


@pytest.mark.parametrize('fault, what', [
    ('empty', 'empty file (0 bytes)'),
    ('truncated', 'truncated image ('),
    ('undecodable', 'cannot be decoded as an image ('),
])
def test_bad_image_is_named_in_one_line(fault, what, ade, repo_root):
    path = plant(fault, ade20k_file(ade, 'img', 2))
    data = checked(repo_root, ade)
    data[0]  # the others load
    with pytest.raises(DataFileError) as err:
        data[1]
    message = str(err.value)
    assert message.startswith(f'ADE20KDataset sample 1: {path}: {what}')
    assert "on_error='skip'" in message and '\n' not in message


def test_missing_label_is_named(ade, repo_root):
    path = ade20k_file(ade, 'ann', 3)
    os.remove(path)
    with pytest.raises(
            DataFileError,
            match=f'ADE20KDataset sample 2: {path}: file not '
            'found'):
        checked(repo_root, ade)[2]


def test_half_size_label_is_refused_before_the_resize(ade, repo_root):
    label = plant('half_label', ade20k_file(ade, 'ann', 1))
    data = checked(repo_root, ade)
    with pytest.raises(DataFileError) as err:
        data[0]
    assert str(err.value).startswith(
        f'ADE20KDataset sample 0: {label}: label map is 16x24 (HxW) but its '
        f'image {ade20k_file(ade, "img", 1)} is 32x48; fix the annotation, or '
        "opt in to resizing it with CheckSegMap(size_mismatch='resize')")


def test_resize_opt_in_scales_the_label_to_its_image(ade, repo_root):
    label = plant('half_label', ade20k_file(ade, 'ann', 1, 'val'))
    stored = np.array(Image.open(label))
    with logged_warnings() as warned:
        item = checked(repo_root, ade, 'val', seg_map_size='resize')[0]
    gt = item['data_samples'].gt_sem_seg.data[0].numpy()
    assert gt.shape == (32, 48)  # the image's size (the test pipeline)
    # nearest neighbour keeps the stored classes (reduce_zero_label:
    # 0 -> 255, k -> k - 1)
    expected = mmcv.imresize(stored, (48, 32), interpolation='nearest')
    expected = np.where(expected == 0, 255, expected.astype(int) - 1)
    np.testing.assert_array_equal(gt, expected)
    assert any('label maps resized' in m and ': 1 so far' in m and label in m
               for m in warned), warned


def test_label_out_of_range_is_named(ade, repo_root):
    label = ade20k_file(ade, 'ann', 2)
    set_label_value(label, 200)
    with pytest.raises(
            DataFileError,
            match=r'sample 1: .*ADE_train_00000002.png: 4 '
            r'pixel\(s\) with label values \[199\] outside the '
            r'150 classes 0..149'):
        checked(repo_root, ade)[1]


def test_skip_loads_another_sample_and_records_it(ade, repo_root):
    bad = plant('empty', ade20k_file(ade, 'img', 3))
    data = checked(repo_root, ade, on_error='skip')
    loader = DataLoader(
        data,
        batch_size=1,
        num_workers=2,
        collate_fn=lambda batch: batch[0]['data_samples'].img_path)
    paths = [path for _ in range(2) for path in loader]
    assert len(paths) == 8 and bad not in paths
    # written by the two worker processes: once per epoch, more when the
    # random replacement draws the bad sample again
    skipped = data.skipped()
    assert len(skipped) >= 2
    assert {(s['dataset'], s['index'], s['kind'], s['path'])
            for s in skipped} == {('ADE20KDataset', 2, 'empty', bad)}
    record = data.record.path
    del data, loader
    gc.collect()
    assert not osp.exists(record)


def test_skip_is_for_training_data_only(ade, repo_root):
    with pytest.raises(ValueError, match='in test mode, where skipping'):
        checked(repo_root, ade, 'val', test_mode=True, on_error='skip')
    plant('empty', ade20k_file(ade, 'img', 1))
    plant('empty', ade20k_file(ade, 'img', 2))
    plant('empty', ade20k_file(ade, 'img', 3))
    plant('empty', ade20k_file(ade, 'img', 4))
    data = checked(repo_root, ade, on_error='skip', max_refetch=3)
    with pytest.raises(DataFileError, match='4 bad samples in a row'):
        data[0]


def test_other_errors_are_not_skipped_and_name_the_sample(ade, repo_root):
    data = checked(repo_root, ade, on_error='skip')

    def buggy_step(results):
        raise RuntimeError('a bug in a transform')

    data.dataset.pipeline.transforms.append(buggy_step)
    with pytest.raises(RuntimeError, match='a bug in a transform') as err:
        data[0]
    assert getattr(err.value, '__notes__', None) == [
        f'while loading ADE20KDataset sample 0 ({ade20k_file(ade, "img", 1)})'
    ]
    assert data.skipped() == []


def test_wrapper_interface(ade, repo_root):
    data = checked(repo_root, ade)
    inner = data.dataset
    assert len(data) == len(inner) == 4
    assert data.metainfo == inner.metainfo
    assert data.get_data_info(1) == inner.get_data_info(1)
    steps = [type(t).__name__ for t in inner.pipeline.transforms]
    assert steps[:3] == ['LoadImageFromFile', 'LoadAnnotations', 'CheckSegMap']
    check = inner.pipeline.transforms[2]
    assert (check.num_classes, check.ignore_index) == (150, 255)
    # a pipeline that has its own CheckSegMap keeps it alone
    again = CheckedDataset(inner, seg_map_size='resize')
    assert sum(
        isinstance(t, CheckSegMap)
        for t in again.dataset.pipeline.transforms) == 1
    copy = pickle.loads(pickle.dumps(data))  # spawned data workers
    assert copy.get_data_info(0) == data.get_data_info(0)
    assert copy[0]['inputs'].shape[0] == 3  # (random crop and resize)
    cfg = dict(type='ADE20KDataset')
    wrapped = checked_dataset_cfg(cfg, on_error='skip')
    assert wrapped == dict(
        type='mmlocat.CheckedDataset', dataset=cfg, on_error='skip')
    assert checked_dataset_cfg(wrapped) is wrapped
    with pytest.raises(ValueError, match='on_error must be one of'):
        CheckedDataset(inner, on_error='ignore')
    with pytest.raises(ValueError, match='seg_map_size must be one of'):
        CheckedDataset(inner, seg_map_size='crop')


def readme_host_snippet(repo_root):
    """The config lines for the hosts' own tools (docs/reliability.md)."""
    path = osp.join(repo_root, 'docs', 'reliability.md')
    with open(path, encoding='utf-8') as f:
        text = f.read()
    section = text[text.index('* **Data files.**'):]
    block = re.search(r'```python\n(.*?)```', section, re.S).group(1)
    return textwrap.dedent(block)


def test_readme_config_for_the_hosts_tools(ade, tmp_path, repo_root):
    """What the hosts' tools do with the README's lines: mmengine's own
    ``Runner.build_dataloader`` and hook registry, no mmlocat tool."""
    from mmengine.config import Config
    from mmengine.registry import HOOKS
    from mmengine.runner import Runner
    config = tmp_path / 'host.py'
    config.write_text(f'_base_ = {osp.join(repo_root, ADE_CONFIG)!r}\n' +
                      readme_host_snippet(repo_root))
    cfg = Config.fromfile(str(config))
    cfg.merge_from_dict({'train_dataloader.dataset.dataset.data_root': ade})
    bad = plant('empty', ade20k_file(ade, 'img', 2))
    init_default_scope('mmseg')
    loader = Runner.build_dataloader(
        dict(
            cfg.train_dataloader,
            batch_size=1,
            num_workers=0,
            persistent_workers=False))
    assert isinstance(loader.dataset, CheckedDataset)
    assert loader.dataset.on_error == 'skip'
    # the infinite sampler's first 4 indices are a permutation of all 4
    seen = [b['data_samples'][0].img_path for b in islice(loader, 4)]
    assert len(seen) == 4 and bad not in seen
    assert {s['path'] for s in loader.dataset.skipped()} == {bad}
    assert type(HOOKS.build(cfg.custom_hooks[0])).__name__ == \
        'SkippedFilesHook'
