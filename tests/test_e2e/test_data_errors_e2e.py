"""Bad data files through the user's tools (issues 26 and 29).

A generated ADE20K-format set with planted faults, the shipped UperNet
ViT-T config shrunk by :mod:`helpers.shrink` (2 iterations):

* a zero-byte training image: ``tools/train.py`` stops with one line
  naming the file, the dataset and the index;
* a label PNG at half the image's resolution: stopped naming the label
  file before mmseg's resize hides it;
* ``--on-data-error skip`` with a data worker and the
  ``checked_dataset.seg_map_size=resize`` opt-in: trains, logs the skipped
  file, the count at the end of the epoch and the resized labels; the
  dumped config stays as written; then ``tools/test.py`` names a zero-byte
  validation image;
* ``--check-data``: exit 1 with the checker's report before training.
"""
import os.path as osp
import re

import pytest
from helpers.faults import plant
from helpers.harness import run_tool
from helpers.shrink import write_tiny_config

from mmlocat.testing.seg_writers import ade20k_file

pytestmark = pytest.mark.e2e

CONFIG = 'configs/locat/upernet_vit-t_ade20k.py'
ITERS = 2


@pytest.fixture
def data(make_ade20k):
    return make_ade20k(4, 1, (64, 96))


def train(repo_root, tmp_path, data, *extra):
    config = write_tiny_config(
        osp.join(repo_root, CONFIG), str(tmp_path / 'tiny.py'), data, ITERS)
    work = str(tmp_path / 'work')
    proc = run_tool('tools/train.py', config, '--work-dir', work, *extra)
    return proc, config, work


def lines_naming(text, path):
    return [line for line in text.splitlines() if path in line]


@pytest.mark.slow
def test_zero_byte_image_is_named_in_one_line(data, tmp_path, repo_root):
    bad = plant('empty', ade20k_file(data, 'img', 3))
    proc, _, _ = train(repo_root, tmp_path, data)
    assert proc.returncode != 0
    named = lines_naming(proc.stderr, bad)
    assert named == [
        'mmlocat.datasets.file_checks.DataFileError: ADE20KDataset sample '
        f"2: {bad}: empty file (0 bytes) (CheckedDataset(on_error='skip') or "
        'tools/train.py --on-data-error skip skips such samples in training)'
    ], proc.stderr[-3000:]
    assert '!buf.empty()' not in proc.stderr


def test_half_size_label_is_refused_in_training(data, tmp_path, repo_root):
    label = plant('half_label', ade20k_file(data, 'ann', 2))
    proc, _, _ = train(repo_root, tmp_path, data)
    assert proc.returncode != 0
    named = lines_naming(proc.stderr, label)
    assert len(named) == 1, proc.stderr[-3000:]
    assert (f'ADE20KDataset sample 1: {label}: label map is 32x48 (HxW) but '
            f'its image {ade20k_file(data, "img", 2)} is 64x96') in named[0]


@pytest.mark.slow
def test_skip_and_resize_train_then_test_names_a_val_image(
        data, tmp_path, repo_root):
    bad = plant('empty', ade20k_file(data, 'img', 3))
    plant('half_label', ade20k_file(data, 'ann', 2))
    proc, config, work = train(repo_root, tmp_path, data, '--on-data-error',
                               'skip', '--cfg-options',
                               'train_dataloader.num_workers=1',
                               'checked_dataset.seg_map_size=resize')
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    assert f'skipped ADE20KDataset sample 2: {bad}: empty file' in log
    counts = re.findall(
        r'skipped (\d+) training sample\(s\) with bad files in iterations '
        rf'up to {ITERS} \((\d+) in total\): empty: {re.escape(bad)}', log)
    assert len(counts) == 1 and counts[0][0] == counts[0][1], log[-4000:]
    assert int(counts[0][0]) >= 1
    assert (f'{counts[0][0]} training sample(s) skipped for bad files in this '
            'run') in log
    assert "label maps resized to their image's size" in log
    assert f'Iter(train) [{ITERS}/{ITERS}]' in log
    dumped = open(osp.join(work, 'tiny.py')).read()
    assert 'CheckedDataset' not in dumped  # the config stays as written
    val = plant('empty', ade20k_file(data, 'img', 1, 'val'))
    proc = run_tool('tools/test.py', config,
                    osp.join(work, f'iter_{ITERS}.pth'), '--work-dir',
                    str(tmp_path / 'test'))
    assert proc.returncode != 0
    assert len(lines_naming(proc.stderr, val)) == 1, proc.stderr[-3000:]
    assert f'ADE20KDataset sample 0: {val}: empty file' in proc.stderr


def test_check_data_stops_before_training(data, tmp_path, repo_root):
    bad = plant('truncated', ade20k_file(data, 'img', 1))
    proc, _, _ = train(repo_root, tmp_path, data, '--check-data')
    assert proc.returncode == 1
    assert ('train ADE20KDataset: 4 samples, 8 files checked: 1 fault(s) '
            'truncated 1') in proc.stderr
    assert f'    {bad}: truncated image (' in proc.stderr
    assert 'val ADE20KDataset: 1 samples, 2 files checked: no fault' in \
        proc.stderr
    assert 'Iter(train)' not in proc.stdout + proc.stderr
