"""End to end: zero-shot segmentation configs through the user's tools.

Generated VOC and COCO-Object (converted from COCO-Stuff-164k maps) data
in their real layouts; the text embeddings are written by
``tools/misc/dump_text_embeddings.py --seg-config`` with a random-init
open_clip model (tiny custom config), from the configs' class-name files;
the shipped configs are derived with a tiny CLIP tower, converted from the
same open_clip file by ``clip2mmlocat.py``, and evaluated by
``tools/test.py`` (mmseg's ``IoUMetric`` prints mIoU). Embeddings of
another class order stop the run before the first batch; a tower given to
``tools/test.py`` that cannot be paired with the embeddings stops it at
loading.
"""
import json
import os.path as osp
import re

import numpy as np
import pytest
import torch
from helpers.harness import run_tool

from mmlocat.testing import generate

pytestmark = pytest.mark.e2e

TINY_CLIP = dict(
    embed_dim=24,
    quick_gelu=True,
    vision_cfg=dict(
        image_size=32, layers=2, width=32, head_width=16, patch_size=8),
    text_cfg=dict(
        context_length=77, vocab_size=49408, width=32, heads=2, layers=1))

CONFIG = """
_base_ = {bases!r}
model = dict(
    backbone=dict(
        arch=dict(_delete_=True, embed_dims=32, num_layers=2, num_heads=2,
                  feedforward_channels=128, output_dims=24),
        img_size=32, patch_size=8, init_cfg=None),
    text_embeddings={emb!r},
    test_cfg=dict(crop_size=(32, 32), stride=(16, 16)){extra})
test_dataloader = dict(
    num_workers=0, persistent_workers=False,
    dataset=dict(data_root={root!r}, {prefix}
                 pipeline=[
                     dict(type='LoadImageFromFile'),
                     dict(type='Resize', scale=(2048, 40), keep_ratio=True),
                     dict(type='LoadAnnotations'),
                     dict(type='PackSegInputs')]))
"""


@pytest.fixture(scope='module')
def open_clip_files(tmp_path_factory):
    import open_clip
    root = tmp_path_factory.mktemp('clip')
    cfg = root / 'tiny-zs-e2e.json'
    cfg.write_text(json.dumps(TINY_CLIP))
    open_clip.add_model_config(str(cfg))
    torch.manual_seed(0)
    model = open_clip.create_model('tiny-zs-e2e', pretrained=None)
    weights = root / 'tiny.bin'
    torch.save(model.state_dict(), weights)
    return str(cfg), str(weights)


def _derive(tmp_path, repo_root, leaf, root, emb, prefix='', bases=()):
    """A tiny-tower config from a shipped leaf, or from ``bases`` (paths
    under configs/last/, e.g. a tower base and a dataset base) passing on
    the dataset base's ``zero_shot_dataset``."""
    last = osp.join(repo_root, 'configs', 'last')
    config = tmp_path / 'tiny.py'
    config.write_text(
        CONFIG.format(
            bases=[osp.join(last, b) for b in (bases or [leaf])],
            emb=emb,
            root=root,
            prefix=prefix,
            extra=', **_base_.zero_shot_dataset' if bases else ''))
    return config


def _random_checkpoint(config, path):
    """The config's model as built (tools/misc/init_checkpoint.py)."""
    run_tool('tools/misc/init_checkpoint.py', config, path).ok()


def _evaluate(tmp_path, config, clip):
    """The user's chain: the embeddings and the tower converted from one
    CLIP file (both record it), then tools/test.py."""
    emb = str(tmp_path / 'emb.npy')
    run_tool('tools/misc/dump_text_embeddings.py', '--seg-config', config,
             '--model-config', clip[0], '--pretrained', clip[1], '--templates',
             'imagenet80', '--prompt-style', 'plain', emb).ok()
    tower = tmp_path / 'tower.pth'
    run_tool('tools/model_converters/clip2mmlocat.py', '--model-config',
             clip[0], clip[1], tower).ok()
    return run_tool('tools/test.py', config, tower, '--work-dir',
                    tmp_path / 'work').ok(4000)


@pytest.mark.timeout(300)
def test_voc20(tmp_path, repo_root, open_clip_files):
    paths = generate('pascal_voc', str(tmp_path / 'data'), 1, 3, (40, 56))
    config = _derive(tmp_path, repo_root, 'zeroshot_clip-b16_voc20.py',
                     paths['data_root'], str(tmp_path / 'emb.npy'))
    log = _evaluate(tmp_path, config, open_clip_files)
    miou = float(re.findall(r'mIoU: ([0-9.]+)', log)[-1])
    assert 0 <= miou <= 100
    # IoUMetric's table lists the 20 VOC20 classes, no background.
    assert re.search(r'\|\s+aeroplane\s+\|', log)
    assert not re.search(r'\|\s+background\s+\|', log)


@pytest.mark.timeout(300)
def test_coco_object_with_background(tmp_path, repo_root, open_clip_files):
    """SCLIP's COCO-Object: maps from COCO-Stuff, a text background class
    of stuff words (line 1 of the class-name file) and prob_thd."""
    paths = generate('coco_object_stuff', str(tmp_path / 'data'), 1, 2,
                     (40, 48))
    prefix = (f"data_prefix=dict(img_path={paths['val_img_dir']!r}, "
              f"seg_map_path={paths['val_seg_dir']!r}),")
    config = _derive(tmp_path, repo_root,
                     'zeroshot_last-clip-b16_coco-object.py',
                     paths['data_root'], str(tmp_path / 'emb.npy'), prefix)
    log = _evaluate(tmp_path, config, open_clip_files)
    assert 0 <= float(re.findall(r'mIoU: ([0-9.]+)', log)[-1]) <= 100
    assert re.search(r'\|\s+background\s+\|', log)
    side = json.load(open(tmp_path / 'emb.json'))
    assert len(side['classes']) == 81 and side['classes'][0] == 'background'
    assert len(
        side['queries']) == 113 and side['queries'][:2] == ['sky', 'wall']


@pytest.mark.timeout(300)
def test_embeddings_of_other_classes_stop_the_run(tmp_path, repo_root):
    from mmlocat.testing.voc_cityscapes_writers import VOC_CLASSES
    from mmlocat.text import save_text_embeddings
    paths = generate('pascal_voc', str(tmp_path / 'data'), 1, 1, (32, 32))
    emb = str(tmp_path / 'emb.npy')
    names = list(VOC_CLASSES)
    names[3], names[4] = names[4], names[3]
    rng = np.random.default_rng(0)
    save_text_embeddings(emb, rng.normal(size=(20, 24)), names)
    # one name per class: the earlier protocol (no class-name file, whose
    # check would refuse the file at build already)
    config = _derive(
        tmp_path,
        repo_root,
        None,
        paths['data_root'],
        emb,
        bases=[
            '_base_/zeroshot_clip-b16.py', '_base_/zeroshot_voc20_mmlocat.py'
        ])
    ckpt = tmp_path / 'random.pth'
    _random_checkpoint(config, ckpt)
    # record-less embeddings and tower: the class order is the point here
    proc = run_tool('tools/test.py', config, ckpt, '--work-dir',
                    tmp_path / 'work', '--cfg-options',
                    'model.check_clip=False')
    log = proc.output
    assert proc.returncode != 0, log[-4000:]
    assert "different order (first difference at row 3: 'bottle'" in log
    assert 'mIoU:' not in log


@pytest.mark.timeout(300)
def test_an_unproven_tower_given_to_test_py_is_refused(tmp_path, repo_root,
                                                       open_clip_files):
    """The config's init_cfg names no tower (or the right one); the tower
    tools/test.py loads is the one evaluated. It was never checked: a
    record-less tower was evaluated with the embeddings of a recorded CLIP
    (mIoU of an unpaired model, exit 0)."""
    paths = generate('pascal_voc', str(tmp_path / 'data'), 1, 1, (32, 32))
    emb = str(tmp_path / 'emb.npy')
    config = _derive(tmp_path, repo_root, 'zeroshot_clip-b16_voc20.py',
                     paths['data_root'], emb)
    clip = open_clip_files
    run_tool('tools/misc/dump_text_embeddings.py', '--seg-config', config,
             '--model-config', clip[0], '--pretrained', clip[1], emb).ok()
    ckpt = tmp_path / 'random.pth'
    _random_checkpoint(config, ckpt)  # no records
    proc = run_tool('tools/test.py', config, ckpt, '--work-dir',
                    tmp_path / 'work')
    assert proc.returncode != 0, proc.output[-4000:]
    assert (f'cannot prove that {emb} and the tower {ckpt} come from one '
            "CLIP") in proc.output
    assert "random.pth records no CLIP (meta['clip'])" in proc.output
    assert 'mIoU:' not in proc.output
    # the named opt-out evaluates it, and logs the pairing it did not check
    log = run_tool('tools/test.py', config, ckpt, '--work-dir',
                   tmp_path / 'work', '--cfg-options',
                   'model.check_clip=False').ok(4000)
    assert f'check_clip=False: {emb} is used with the tower {ckpt}' in log
    assert 'mIoU:' in log
