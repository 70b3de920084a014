"""End to end: coarse segmentation (VOC12) and CorLoc (VOC12 trainval,
COCO20k) configs through ``tools/test.py`` on generated data.

The VOC 2012 tree and a COCO tree are written in their real layouts; the
COCO20k file is built by ``tools/dataset_converters/coco20k.py`` from the
COCO annotations and an image list in LOST's format. The shipped configs
are derived with a 32-d, 1-layer ViT and a random checkpoint.
"""
import os.path as osp
import re

import pytest
import torch
from helpers.harness import run_tool

from mmlocat.testing import generate

pytestmark = pytest.mark.e2e

CONFIG = """
_base_ = [{base!r}]
model = dict(
    backbone=dict(
        arch=dict(_delete_=True, embed_dims=32, num_layers=1, num_heads=2,
                  feedforward_channels=64)))
test_dataloader = dict(
    num_workers=0, dataset=dict(data_root={root!r}{extra}))
"""

# the shipped CorLoc configs refuse a set of another size than the
# protocol's (5011 / 11540 / 19817 images)
TINY_SET = ', expected_num_images=None'


def _derive(tmp_path, repo_root, leaf, root, extra=''):
    config = tmp_path / f'tiny_{leaf}'
    config.write_text(
        CONFIG.format(
            base=osp.join(repo_root, 'configs', 'last', leaf),
            root=root,
            extra=extra))
    return config


def _tested_metrics(config, tmp_path):
    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmpretrain.registry import MODELS

    from mmlocat.utils.checkpoint_io import save_checkpoint
    cfg = Config.fromfile(str(config))
    init_default_scope('mmpretrain')
    torch.manual_seed(0)
    ckpt = tmp_path / 'random.pth'
    save_checkpoint(MODELS.build(cfg.model).state_dict(), str(ckpt))
    log = run_tool('tools/test.py', config, ckpt, '--work-dir',
                   tmp_path / 'work').ok(4000)
    return {
        k: float(v)
        for k, v in re.findall(r'((?:coarse_seg|corloc)/\w+): ([0-9.]+)', log)
    }


@pytest.fixture(scope='module')
def voc(tmp_path_factory):
    root = tmp_path_factory.mktemp('voc')
    return generate('pascal_voc', str(root), 2, 3, (48, 64))


@pytest.mark.timeout(300)
def test_coarse_seg_voc12(tmp_path, repo_root, voc):
    config = _derive(tmp_path, repo_root, 'coarseseg_last-dino-s_voc12.py',
                     voc['data_root'])
    metrics = _tested_metrics(config, tmp_path)
    assert set(metrics) == {
        'coarse_seg/fg_IoU', 'coarse_seg/bg_IoU', 'coarse_seg/mIoU',
        'coarse_seg/num_images'
    }
    assert metrics['coarse_seg/num_images'] == 3  # VOC12 val
    for key in ('fg_IoU', 'bg_IoU'):
        assert 0 <= metrics[f'coarse_seg/{key}'] <= 100
    assert metrics['coarse_seg/mIoU'] == pytest.approx(
        (metrics['coarse_seg/fg_IoU'] + metrics['coarse_seg/bg_IoU']) / 2,
        abs=1e-3)


@pytest.mark.timeout(300)
def test_corloc_voc12_trainval(tmp_path, repo_root, voc):
    config = _derive(tmp_path, repo_root, 'corloc_dino-s_voc12.py',
                     voc['data_root'], TINY_SET)
    metrics = _tested_metrics(config, tmp_path)
    assert metrics['corloc/num_images'] == 5  # trainval: 2 + 3
    assert metrics['corloc/num_without_gt'] == 0
    assert 0 <= metrics['corloc/CorLoc'] <= 1
    assert metrics['corloc/images_per_s'] > 0


@pytest.mark.timeout(300)
def test_corloc_coco20k(tmp_path, repo_root):
    paths = generate('coco', str(tmp_path / 'coco'), 4, 1, (48, 48))
    root = paths['data_root']
    ann = osp.join(root, paths['train_ann_file'])
    # LOST's list format: one "train2014/<file>" a line; three of four.
    listed = [f'{i:012d}.jpg' for i in (1, 2, 4)]
    image_list = tmp_path / 'coco_20k_filenames.txt'
    image_list.write_text(''.join(f'train2014/{n}\n' for n in listed))
    out = osp.join(root, 'annotations', 'coco20k.json')
    run_tool('tools/dataset_converters/coco20k.py', ann, image_list, out).ok()
    config = _derive(
        tmp_path, repo_root, 'corloc_dino-s_coco20k.py', root,
        f", data_prefix=dict(img_path={paths['train_img_dir']!r})" + TINY_SET)
    metrics = _tested_metrics(config, tmp_path)
    assert metrics['corloc/num_images'] == 3
    assert 0 <= metrics['corloc/CorLoc'] <= 1
