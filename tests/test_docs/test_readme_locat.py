"""configs/locat/README.md's commands and snippets, from its own text.

The released timm LocAtViTs convert to the files the configs load; UperNet
trains (shrunk) from the converted LocAtViT-B, the probe recipe's
checkpoint tests; the "existing mmseg config" snippet, with the layer-decay
snippet as its optimizer, builds, loads the converted file strictly and
makes its optimizer.
"""
import os.path as osp

import pytest
from checkpoint_makers import loaded_from, prepare_model
from mmengine.config import Config
from readme_blocks import find_block
from readme_runner import ReadmeRunner, take

pytestmark = pytest.mark.e2e

README = 'configs/locat/README.md'


def weights_block():
    return find_block(README, 'locat2mmlocat.py locatvit_tiny')


def test_pretrained_weights(new_root, monkeypatch):
    root = new_root()
    ReadmeRunner(root).run(weights_block())
    monkeypatch.chdir(root.path)
    for config in ('configs/locat/probe_locat-t_ade20k.py',
                   'configs/locat/upernet_locat-b_ade20k.py'):
        cfg = Config.fromfile(config)
        model = prepare_model(cfg, root.made)
        model.init_weights()
        assert loaded_from(model, cfg), config


def test_train_and_test(new_root):
    root = new_root()
    runner = ReadmeRunner(root)
    runner.run(weights_block())
    block = find_block(README, 'python tools/train.py configs/locat/upernet')
    train, test = runner.run(block, lines=[1, 3])
    print(runner.timings)
    work = 'work_dirs/upernet_locat-b_ade20k'
    assert osp.isfile(root.abs(f'{work}/iter_2.pth'))
    assert 'mIoU' in train and 'mIoU' in test


def test_existing_mmseg_config(new_root, monkeypatch):
    root = new_root()
    ReadmeRunner(root).run(weights_block(), lines=[1, 3])
    config = take(find_block(README, "_base_ = 'mmseg::vit/"))
    optim = take(find_block(README, 'LayerDecayOptimWrapperConstructor'))
    path = root.abs('my_upernet.py')
    with open(path, 'w') as f:
        f.write(config + '\n' + optim)
    monkeypatch.chdir(root.path)
    cfg = Config.fromfile(path)
    model = prepare_model(cfg, root.made)
    model.init_weights()
    assert loaded_from(model, cfg)
    from mmengine.optim import build_optim_wrapper
    wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    rates = {g['lr'] for g in wrapper.optimizer.param_groups}
    assert len(rates) > 12  # one rate per depth (layer decay)
    assert max(rates) == 1e-4
