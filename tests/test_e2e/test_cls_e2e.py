"""Classification end to end: tools/train.py then tools/test.py.

A tiny LocAtViT (issue recipe configs/locat/locat-t_8xb128_in1k.py) and a
tiny LaSt-ViT (configs/last/last-b_8xb512_in1k.py) train a few iterations
on a generated ImageNet folder and report top-1 through tools/test.py. The
shipped configs are shrunk only by the derived config below: tiny arch,
32-pixel pipelines, 10 classes, batch 4, two epochs of 5 iterations, and a
plain OptimWrapper (AmpOptimWrapper needs an accelerator).
"""
import os.path as osp
import re

import pytest
from helpers.harness import run_tool

from mmlocat.testing import generate

pytestmark = pytest.mark.e2e

DERIVED = """
_base_ = {base!r}
model = dict(
    backbone=dict(
        arch=dict(_delete_=True, embed_dims=32, num_layers=2, num_heads=2,
                  feedforward_channels=64),
        img_size=32,
        drop_path_rate=0.),
    head=dict(num_classes=10, in_channels=32))
data_preprocessor = dict(num_classes=10)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=32, backend='pillow'),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=36, edge='short', backend='pillow'),
    dict(type='CenterCrop', crop_size=32),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    batch_size=4, num_workers=0, persistent_workers=False,
    dataset=dict(data_root={root!r}, pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=4, num_workers=0, persistent_workers=False,
    dataset=dict(data_root={root!r}, pipeline=test_pipeline))
test_dataloader = val_dataloader
optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.05),
    clip_grad=dict(max_norm=5.0))
param_scheduler = []
train_cfg = dict(by_epoch=True, max_epochs=2, val_interval=2)
auto_scale_lr = dict(enable=False)
default_hooks = dict(logger=dict(interval=1), checkpoint=dict(interval=2))
"""

CONFIGS = {
    'locat': ('configs/locat/locat-t_8xb128_in1k.py', 'LocAtViT'),
    'last': ('configs/last/last-b_8xb512_in1k.py', 'LaStViT'),
}


@pytest.fixture(scope='module')
def imagenet_root(tmp_path_factory) -> str:
    root = str(tmp_path_factory.mktemp('imagenet'))
    # 10 classes x 2 images per split, 40 px
    return generate(
        'imagenet', root, num_train=2, num_val=2, img_size=(40, 40),
        seed=0)['data_root']


@pytest.mark.timeout(600)
@pytest.mark.parametrize('family', sorted(CONFIGS))
@pytest.mark.slow
def test_train_then_test_top1(family, imagenet_root, tmp_path, repo_root):
    base, backbone = CONFIGS[family]
    config = tmp_path / f'{family}_tiny.py'
    config.write_text(
        DERIVED.format(base=osp.join(repo_root, base), root=imagenet_root))
    work_dir = str(tmp_path / 'work')
    train_log = run_tool('tools/train.py', config, '--work-dir', work_dir).ok()
    assert f"type='mmlocat.{backbone}'" in train_log
    # 20 images / batch 4 = 5 iterations per epoch, 2 epochs
    assert re.search(r'Epoch\(train\)\s+\[2\]\[5/5\]',
                     train_log), train_log[-3000:]
    checkpoint = osp.join(work_dir, 'epoch_2.pth')
    assert osp.isfile(checkpoint)

    log = run_tool('tools/test.py', config, checkpoint, '--work-dir',
                   tmp_path / 'test').ok()
    match = re.search(r'accuracy/top1: ([0-9.]+)', log)
    assert match, log[-3000:]
    assert 0. <= float(match.group(1)) <= 100.
    # the test set is the val set, and training validated the weights it
    # saved in epoch_2.pth: the same top-1 unless the load lost something
    val = re.findall(r'Epoch\(val\).*accuracy/top1: ([0-9.]+)', train_log)
    assert val, train_log[-3000:]
    assert float(match.group(1)) == float(val[-1])
