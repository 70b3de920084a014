"""Every classification config in configs/locat/ and configs/last/ loads
and builds; each plain-ViT twin differs from its LocAtViT config only in
gaug/prr, the LaSt-ViT baseline only in the pooling; the LaSt-ViT recipe is
the public one."""
import copy
import glob
import os.path as osp

import numpy as np
import pytest
import torch
from checkpoint_makers import load_config
from helpers.tiny_archs import TINY_VIT
from mmengine.config import Config
from mmengine.registry import DefaultScope

import mmlocat  # noqa: F401

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
CFG_DIR = osp.join(REPO, 'configs', 'locat')
CLS_CONFIGS = sorted(
    osp.basename(p)
    for pattern in ('locat-*_in1k.py', 'vit-*_in1k.py', 'locat-t_cifar100.py',
                    'vit-t_cifar100.py', 'locat-t_mini-imagenet.py',
                    'vit-t_mini-imagenet.py')
    for p in glob.glob(osp.join(CFG_DIR, pattern)))
TINY = TINY_VIT
LAST = ('last-b_8xb512_in1k.py', 'vit-b_8xb512_in1k.py')  # configs/last/
EXPECTED = {
    'locat-t_8xb128_in1k.py': ('t', 0.1, 192),
    'locat-s_8xb128_in1k.py': ('deit-small', 0.2, 384),
    'locat-b_8xb128_in1k.py': ('b', 0.4, 768),
}


def load(name: str) -> Config:
    """A copy of the shipped config (parsed once per session)."""
    folder = 'last' if name in LAST else 'locat'
    return load_config(osp.join('configs', folder, name))


def test_expected_configs_exist():
    for arch in 'tsb':
        for kind in ('locat', 'vit'):
            assert f'{kind}-{arch}_8xb128_in1k.py' in CLS_CONFIGS
    for data in ('cifar100', 'mini-imagenet'):
        assert f'locat-t_{data}.py' in CLS_CONFIGS
        assert f'vit-t_{data}.py' in CLS_CONFIGS


@pytest.mark.parametrize('name', CLS_CONFIGS + list(LAST))
def test_config_loads_and_model_builds(name):
    from mmpretrain.registry import MODELS
    cfg = load(name)
    assert cfg.custom_imports == dict(
        imports=['mmlocat'], allow_failed_imports=False)
    assert cfg.default_scope == 'mmpretrain'
    model_cfg = copy.deepcopy(cfg.model)
    model_cfg.backbone.arch = TINY  # building B/L for real is slow
    model_cfg.head.in_channels = 32
    with DefaultScope.overwrite_default_scope(cfg.default_scope):
        model = MODELS.build(model_cfg).eval()
    if name in LAST:
        assert model.backbone.pooling == ('lazy_strike' if
                                          name.startswith('last') else 'cls')
        x, num_classes = torch.rand(2, 3, 224, 224), 1000
    else:
        assert cfg.model.backbone.type == 'mmlocat.LocAtViT'
        assert cfg.data_preprocessor.mean == [127.5] * 3
        gaug = name.startswith('locat')
        assert (model.backbone.layers[0].attn.gaug is not None) == gaug
        assert (model.backbone.pool.prr is not None) == gaug
        x, num_classes = torch.rand(1, 3, 32, 32), cfg.model.head.num_classes
    with torch.no_grad():
        out = model(x, mode='tensor')
    assert out.shape == (len(x), num_classes)


@pytest.mark.parametrize('name', [n for n in CLS_CONFIGS if n[:3] == 'vit'])
def test_twins_share_the_recipe(name):
    vit = load(name).to_dict()
    locat = load(name.replace('vit', 'locat', 1)).to_dict()
    for cfg, flag in ((vit, False), (locat, True)):
        assert cfg['model']['backbone'].pop('gaug') is flag
        assert cfg['model']['backbone'].pop('prr') is flag
    assert vit == locat


def test_recipe_values():
    for name, (arch, dpr, dims) in EXPECTED.items():
        cfg = load(name)
        assert cfg.model.backbone.arch == arch
        assert cfg.model.backbone.drop_path_rate == dpr
        assert cfg.model.head.in_channels == dims
    cfg = load('locat-t_8xb128_in1k.py')
    assert cfg.train_cfg.max_epochs == 300
    assert cfg.train_dataloader.batch_size * 8 == 1024
    assert cfg.auto_scale_lr.base_batch_size == 1024
    assert cfg.optim_wrapper.type == 'AmpOptimWrapper'
    assert cfg.optim_wrapper.optimizer.lr == 1e-3
    assert cfg.optim_wrapper.optimizer.weight_decay == 0.05
    assert cfg.optim_wrapper.clip_grad.max_norm == 5.0
    warmup, decay = cfg.param_scheduler
    assert (warmup.type, warmup.end, decay.begin, decay.end) == ('LinearLR',
                                                                 20, 20, 300)
    assert [a.alpha for a in cfg.model.train_cfg.augments] == [0.8, 1.0]
    assert cfg.model.head.loss.label_smooth_val == 0.1
    steps = {t.type: t for t in cfg.train_dataloader.dataset.pipeline}
    assert steps['RandomErasing'].erase_prob == 0.25
    assert steps['RandAugment'].magnitude_level == 9
    assert steps['RandAugment'].magnitude_std == 0.5
    for name in ('locat-t_cifar100.py', 'locat-t_mini-imagenet.py'):
        cfg = load(name)
        assert cfg.train_cfg.max_epochs == 600
        assert cfg.optim_wrapper.optimizer.lr == 5e-4
        assert cfg.param_scheduler[0].end == 120
        assert cfg.model.head.num_classes == 100


@pytest.mark.parametrize('name', [
    'locat-t_8xb128_in1k.py', 'locat-t_cifar100.py',
    'locat-t_mini-imagenet.py', 'last-b_8xb512_in1k.py'
])
def test_pipelines_run(name):
    from mmengine.dataset import Compose
    cfg = load(name)
    rng = np.random.default_rng(0)
    for loader, size in ((cfg.train_dataloader, 224), (cfg.val_dataloader,
                                                       224)):
        steps = [
            t for t in loader.dataset.pipeline
            if t.type != 'LoadImageFromFile'  # feed a decoded image instead
        ]
        shape = (32, 32, 3) if 'cifar' in name else (300, 400, 3)
        img = rng.integers(0, 256, shape, dtype=np.uint8)
        with DefaultScope.overwrite_default_scope(cfg.default_scope):
            pipeline = Compose(steps)
        out = pipeline(dict(img=img, img_shape=shape[:2], gt_label=1))
        assert tuple(out['inputs'].shape) == (3, size, size)


def test_locat_s_is_deit_small():
    """LocAtViT-S is DeiT-S (384-d, 12 blocks, 6 heads): the configs name it
    by mmpretrain's unambiguous alias, which builds that network ('s' is
    mmpretrain's 768-d ViT-S)."""
    from mmpretrain.registry import MODELS
    backbone = copy.deepcopy(load('locat-s_8xb128_in1k.py').model.backbone)
    assert backbone.arch == 'deit-small'
    backbone.init_cfg = None
    with torch.device('meta'), DefaultScope.overwrite_default_scope(
            'mmpretrain'):
        model = MODELS.build(backbone)
    assert model.embed_dims == 384 and len(model.layers) == 12
    assert model.layers[0].attn.num_heads == 6


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
