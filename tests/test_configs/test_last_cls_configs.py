"""The LaSt-ViT ImageNet configs load, build, follow the public recipe, and
the plain-ViT baseline differs only in the pooling."""
import copy
import os.path as osp

import numpy as np
import pytest
import torch
from helpers.tiny_archs import TINY_VIT
from mmengine.config import Config
from mmengine.registry import DefaultScope

import mmlocat  # noqa: F401

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
NAMES = ('last-b_8xb512_in1k.py', 'vit-b_8xb512_in1k.py')
TINY = TINY_VIT


def load(name: str) -> Config:
    return Config.fromfile(osp.join(REPO, 'configs', 'last', name))


@pytest.mark.parametrize('name', NAMES)
def test_config_builds_and_runs(name):
    from mmpretrain.registry import MODELS
    cfg = load(name)
    assert cfg.custom_imports == dict(
        imports=['mmlocat'], allow_failed_imports=False)
    assert cfg.default_scope == 'mmpretrain'
    model_cfg = copy.deepcopy(cfg.model)
    model_cfg.backbone.arch = TINY
    model_cfg.head.in_channels = 32
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        model = MODELS.build(model_cfg).eval()
    assert model.backbone.pooling == ('lazy_strike'
                                      if name.startswith('last') else 'cls')
    with torch.no_grad():
        out = model(torch.rand(2, 3, 224, 224), mode='tensor')
    assert out.shape == (2, 1000)


def test_public_recipe():
    cfg = load('last-b_8xb512_in1k.py')
    backbone = cfg.model.backbone
    assert (backbone.type, backbone.arch, backbone.topk,
            backbone.out_type) == ('mmlocat.LaStViT', 'b', 1, 'cls_token')
    assert cfg.model.head.type == 'VisionTransformerClsHead'
    assert cfg.model.head.in_channels == 768
    assert 'train_cfg' not in cfg.model  # no mixup / cutmix
    assert cfg.model.head.loss.type == 'CrossEntropyLoss'
    assert cfg.train_cfg.max_epochs == 100
    assert cfg.train_dataloader.batch_size * 8 == 4096
    assert cfg.auto_scale_lr.base_batch_size == 4096
    optim = cfg.optim_wrapper
    assert optim.optimizer.type == 'AdamW'
    assert optim.optimizer.lr == 1e-3
    assert optim.optimizer.weight_decay == 0.3
    assert tuple(optim.optimizer.betas) == (0.9, 0.95)
    warmup, cosine = cfg.param_scheduler
    assert (warmup.type, warmup.start_factor, warmup.begin,
            warmup.end) == ('LinearLR', 0.1, 0, 1)  # 1 of 100 epochs
    assert (cosine.type, cosine.begin, cosine.end) == ('CosineAnnealingLR', 1,
                                                       100)
    assert warmup.convert_to_iter_based and cosine.convert_to_iter_based
    assert cosine.eta_min == pytest.approx(1e-6)
    train = [t.type for t in cfg.train_dataloader.dataset.pipeline]
    assert train == [
        'LoadImageFromFile', 'RandomResizedCrop', 'RandomFlip', 'PackInputs'
    ]
    assert cfg.data_preprocessor.mean == [123.675, 116.28, 103.53]


def test_baseline_changes_only_the_pooling():
    last = load('last-b_8xb512_in1k.py').to_dict()
    vit = load('vit-b_8xb512_in1k.py').to_dict()
    assert last['model']['backbone'].pop('pooling') == 'lazy_strike'
    assert vit['model']['backbone'].pop('pooling') == 'cls'
    assert last == vit


def test_pipelines_run():
    from mmengine.dataset import Compose
    cfg = load('last-b_8xb512_in1k.py')
    img = np.random.default_rng(0).integers(
        0, 256, (300, 400, 3), dtype=np.uint8)
    for loader in (cfg.train_dataloader, cfg.val_dataloader):
        steps = [
            t for t in loader.dataset.pipeline if t.type != 'LoadImageFromFile'
        ]
        with DefaultScope.overwrite_default_scope('mmpretrain'):
            pipeline = Compose(steps)
        out = pipeline(dict(img=img, img_shape=img.shape[:2], gt_label=1))
        assert tuple(out['inputs'].shape) == (3, 224, 224)
