"""Every shipped segmentation config loads, builds (tiny arch swap) and
follows its recipe; every plain-ViT twin differs from its LocAtViT / LaSt-ViT
config only in the documented keys."""
import copy
import glob
import os.path as osp

import pytest
import torch
from checkpoint_makers import load_config
from helpers.shrink import tiny_backbone, tiny_head
from helpers.tiny_archs import tiny_vit
from mmengine.config import Config
from mmengine.registry import DefaultScope

import mmlocat  # noqa: F401

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def _names(pattern):
    return sorted(
        osp.relpath(p, osp.join(REPO, 'configs'))
        for p in glob.glob(osp.join(REPO, 'configs', pattern)))


UPERNET = _names('locat/upernet_*.py') + _names('last/upernet_*.py')
PROBES = _names('locat/probe_*.py')
DEMOS = _names('demo/*.py')
ALL = UPERNET + PROBES + DEMOS
DATASETS = {
    'ade20k': ('ADE20KDataset', 150, (512, 512)),
    'coco-stuff164k': ('COCOStuffDataset', 171, (512, 512)),
    'pascal-context-59': ('PascalContextDataset59', 59, (480, 480)),
}
WIDTH = dict(t=192, s=384, b=768)
# The arch alias each width letter of a config name stands for: LocAtViT-S
# is DeiT-S, which mmpretrain's table calls 'deit-small' ('s' is its ViT-S).
ARCH = dict(t='t', s='deit-small', b='b')
IMAGENET_MEAN = [123.675, 116.28, 103.53]
IMAGENET_STD = [58.395, 57.12, 57.375]
TINY = tiny_vit(num_layers=4)


def load(name: str) -> Config:
    """A copy of the shipped config (parsed once per session)."""
    return load_config(osp.join('configs', name))


def parse(name: str):
    """``locat/upernet_locat-b_ade20k.py`` -> (upernet, locat, b, ade20k)."""
    head, model, dataset = osp.basename(name)[:-3].split('_')
    kind, arch = model.split('-')
    return head, kind, arch, dataset


def test_expected_configs_exist():
    for head, kinds, archs in (('upernet', ('locat', 'vit'), 'tsb'),
                               ('probe', ('locat', 'vit'), 'tb')):
        for kind in kinds:
            for arch in archs:
                for dataset in DATASETS:
                    assert (f'locat/{head}_{kind}-{arch}_{dataset}.py' in ALL)
    for kind in ('last', 'vit'):
        for dataset in DATASETS:
            assert f'last/upernet_{kind}-b_{dataset}.py' in ALL
    assert 'locat/upernet_locat-b_ade20k.py' in ALL  # the user's command
    assert DEMOS


def tiny_model(cfg: Config) -> dict:
    """The model config with a 32-d, 4-block backbone and narrow heads."""
    model = copy.deepcopy(cfg.model)
    model.backbone.update(
        tiny_backbone(model.backbone, num_layers=TINY['num_layers']))
    for key in ('neck', 'decode_head', 'auxiliary_head'):
        if model.get(key):
            model[key].update(tiny_head(model[key]))
    return model


@pytest.mark.parametrize('name', ALL)
@pytest.mark.slow
def test_config_loads_and_model_builds(name):
    from mmseg.registry import MODELS
    cfg = load(name)
    assert cfg.custom_imports == dict(
        imports=['mmlocat'], allow_failed_imports=False)
    assert cfg.default_scope == 'mmseg'
    assert cfg.model.type == 'EncoderDecoder'
    assert cfg.model.backbone.type in ('mmlocat.LocAtViT', 'mmlocat.LaStViT')
    # dense recipes start from checkpoints, never from an init scheme
    # (merged config: a scheme inherited through _base_ counts too)
    assert 'ViTInit' not in str(cfg.model.backbone.get('init_cfg'))
    with DefaultScope.overwrite_default_scope('mmseg'):
        model = MODELS.build(tiny_model(cfg)).eval()
    with torch.no_grad():
        out = model(torch.rand(1, 3, 64, 96), mode='tensor')
    num_classes = cfg.model.decode_head.num_classes
    assert out.shape[:2] == (1, num_classes)
    assert torch.isfinite(out).all()


@pytest.mark.parametrize('name', UPERNET)
def test_upernet_recipe(name):
    cfg = load(name)
    _, kind, arch, dataset = parse(name)
    dataset_type, num_classes, crop = DATASETS[dataset]
    model = cfg.model
    assert model.pretrained is None  # weights come from init_cfg
    assert model.data_preprocessor.size == crop
    assert model.data_preprocessor.mean == IMAGENET_MEAN
    assert model.data_preprocessor.std == IMAGENET_STD
    assert model.decode_head.type == 'UPerHead'
    assert model.auxiliary_head.type == 'FCNHead'
    assert model.decode_head.num_classes == num_classes
    assert model.auxiliary_head.num_classes == num_classes
    assert model.decode_head.channels == 512
    assert model.auxiliary_head.loss_decode.loss_weight == 0.4
    width = WIDTH[arch]
    assert model.decode_head.in_channels == [width] * 4
    assert model.auxiliary_head.in_channels == width
    assert model.neck.in_channels == [width] * 4
    assert model.neck.out_channels == width
    backbone = model.backbone
    assert backbone.arch == ARCH[arch]
    assert backbone.img_size == 224 and backbone.patch_size == 16
    assert backbone.out_type == 'featmap'
    assert list(backbone.out_indices) == [2, 5, 8, 11]
    assert backbone.init_cfg.type == 'Pretrained'
    assert backbone.init_cfg.prefix == 'backbone.'
    assert backbone.init_cfg.checkpoint.startswith('checkpoints/')
    if name.startswith('last/'):
        assert backbone.type == 'mmlocat.LaStViT'
        assert backbone.final_norm is True  # the LazyStrike input
        assert model.neck.type == 'mmlocat.PatchScoreNeck'
        assert tuple(model.neck.scales) == (4, 2, 1, 0.5)
        assert model.neck.pooling == ('lazy_strike'
                                      if kind == 'last' else 'gap')
    else:
        assert backbone.type == 'mmlocat.LocAtViT'
        assert model.neck.type == 'MultiLevelNeck'
        assert model.neck.scales == [4, 2, 1, 0.5]

    # data: crop, dataset class, 8 GPUs x 2 images = 16
    assert cfg.train_dataloader.batch_size * 8 == 16
    assert cfg.train_dataloader.dataset.type == dataset_type
    steps = {t.type: t for t in cfg.train_dataloader.dataset.pipeline}
    assert tuple(steps['RandomCrop'].crop_size) == crop
    if dataset == 'pascal-context-59':
        assert model.test_cfg.mode == 'slide'
        assert tuple(model.test_cfg.crop_size) == crop
        assert tuple(model.test_cfg.stride) == (320, 320)
    else:
        assert model.test_cfg.mode == 'whole'

    # mmseg's ViT-UperNet optimisation
    iters = 160000 if dataset == 'ade20k' else 80000
    assert cfg.train_cfg.max_iters == iters
    optim = cfg.optim_wrapper
    assert optim.type == 'OptimWrapper'
    assert optim.optimizer.type == 'AdamW'
    assert optim.optimizer.lr == 6e-5
    assert tuple(optim.optimizer.betas) == (0.9, 0.999)
    assert optim.optimizer.weight_decay == 0.01
    custom = optim.paramwise_cfg.custom_keys
    decay_mults = {k: v.decay_mult for k, v in custom.items()}
    assert decay_mults == dict(pos_embed=0., cls_token=0., norm=0.)
    warmup, poly = cfg.param_scheduler
    assert (warmup.type, warmup.start_factor, warmup.begin,
            warmup.end) == ('LinearLR', 1e-6, 0, 1500)
    assert (poly.type, poly.power, poly.eta_min, poly.begin,
            poly.end) == ('PolyLR', 1.0, 0.0, 1500, iters)
    assert not warmup.by_epoch and not poly.by_epoch


@pytest.mark.parametrize('name', PROBES)
def test_probe_recipe(name):
    cfg = load(name)
    _, kind, arch, dataset = parse(name)
    dataset_type, num_classes, crop = DATASETS[dataset]
    model = cfg.model
    backbone = model.backbone
    assert backbone.type == 'mmlocat.LocAtViT'
    assert backbone.arch == ARCH[arch]
    # last block, before the final norm, frozen
    assert backbone.out_indices in (-1, [-1], (-1, ), 11, [11], (11, ))
    assert backbone.final_norm is False
    assert backbone.frozen_stages == 12
    assert backbone.out_type == 'featmap'
    assert backbone.init_cfg.prefix == 'backbone.'
    head = model.decode_head
    assert head.type == 'mmlocat.SegProbeHead'
    assert head.in_channels == WIDTH[arch]
    assert head.channels == 512
    assert head.num_classes == num_classes
    assert 'auxiliary_head' not in model or not model.auxiliary_head
    assert model.test_cfg.mode == 'whole'
    assert model.data_preprocessor.size == crop
    assert model.data_preprocessor.mean == IMAGENET_MEAN
    assert model.data_preprocessor.std == IMAGENET_STD
    assert cfg.train_dataloader.dataset.type == dataset_type
    steps = {t.type: t for t in cfg.train_dataloader.dataset.pipeline}
    assert tuple(steps['RandomCrop'].crop_size) == crop
    # 8 GPUs x 4 = 32; AdamW 1e-3 wd 0.01; one cycle, 25% linear warm-up
    assert cfg.train_dataloader.batch_size * 8 == 32
    assert cfg.train_cfg.max_iters == 20000
    optim = cfg.optim_wrapper
    assert optim.optimizer.type == 'AdamW'
    assert optim.optimizer.lr == 1e-3
    assert optim.optimizer.weight_decay == 0.01
    (sched, ) = cfg.param_scheduler
    assert sched.type == 'OneCycleLR'
    assert sched.eta_max == 1e-3 and sched.total_steps == 20000
    assert sched.pct_start == 0.25 and sched.anneal_strategy == 'linear'
    assert not sched.by_epoch


# The UperNet leaves are a model base plus a dataset base (as mmseg's
# upernet_r50_* configs), the dataset's classes and crop set in place.
UPERNET_DATA = {
    'ade20k': 'upernet_vit_ade20k-512x512_160k.py',
    'coco-stuff164k': 'upernet_vit_coco-stuff164k-512x512_80k.py',
    'pascal-context-59': 'upernet_vit_pascal-context-59-480x480_80k.py',
}


@pytest.mark.parametrize(
    'name', [n for n in UPERNET if parse(n)[1] in ('locat', 'last')])
def test_upernet_leaf_is_model_base_plus_dataset_base(name):
    _, kind, arch, dataset = parse(name)
    model_base = load(f'_base_/seg/upernet_{kind}-{arch}.py').to_dict()
    data_base = load(f'_base_/seg/{UPERNET_DATA[dataset]}').to_dict()
    # the model base defines no data, the dataset base no model
    assert 'train_dataloader' not in model_base
    assert 'model' not in data_base and 'train_dataloader' in data_base
    _, num_classes, crop = DATASETS[dataset]
    model = model_base.pop('model')
    model['data_preprocessor']['size'] = crop
    model['decode_head']['num_classes'] = num_classes
    model['auxiliary_head']['num_classes'] = num_classes
    if dataset == 'pascal-context-59':
        model['test_cfg'] = data_base['slide_test_cfg']
    leaf = load(name).to_dict()
    assert leaf.pop('model') == model
    assert leaf == {**model_base, **data_base}


def twin_pairs():
    pairs = []
    for name in UPERNET + PROBES:
        head, kind, arch, dataset = parse(name)
        if kind != 'vit':
            continue
        family = 'last' if name.startswith('last/') else 'locat'
        pairs.append((name, name.replace('_vit-', f'_{family}-')))
    return pairs


@pytest.mark.parametrize('twin, base', twin_pairs())
def test_twin_changes_only_documented_keys(twin, base):
    vit = load(twin).to_dict()
    ref = load(base).to_dict()
    arch = parse(twin)[2]
    vit_bb, ref_bb = vit['model']['backbone'], ref['model']['backbone']
    if base.startswith('last/'):
        # LaSt weights and LazyStrike scores vs plain-ViT weights and GAP
        assert ref_bb['init_cfg'].pop('checkpoint') == (
            'checkpoints/last-b_in1k.pth')
        assert vit_bb['init_cfg'].pop('checkpoint') == (
            'checkpoints/vit-b_8xb512_in1k.pth')
        assert ref['model']['neck'].pop('pooling') == 'lazy_strike'
        assert vit['model']['neck'].pop('pooling') == 'gap'
    else:
        # GAug and PRR off, plain ViT weights of the same size
        assert ref_bb.pop('gaug', True) is True
        assert ref_bb.pop('prr', True) is True
        assert vit_bb.pop('gaug') is False
        assert vit_bb.pop('prr') is False
        assert ref_bb['init_cfg'].pop('checkpoint') == (
            f'checkpoints/locat-{arch}_in1k.pth')
        assert vit_bb['init_cfg'].pop('checkpoint') == (
            f'checkpoints/vit-{arch}_in1k.pth')
    assert vit == ref


def test_demo_twin():
    vit = load('demo/upernet_vit-t_tiny-ade20k.py').to_dict()
    ref = load('demo/upernet_locat-t_tiny-ade20k.py').to_dict()
    assert vit['model']['backbone'].pop('gaug') is False
    assert vit['model']['backbone'].pop('prr') is False
    assert vit == ref


@pytest.mark.parametrize('name', [
    'last/upernet_last-b_ade20k.py', 'last/upernet_vit-b_pascal-context-59.py'
])
def test_last_config_loads_converted_torchvision_weights(name, tmp_path):
    """The LaSt UperNet backbone loads a converted torchvision ViT strictly
    (the released weights' format) through its init_cfg."""
    from mmseg.registry import MODELS
    from torchvision.models.vision_transformer import \
        VisionTransformer as TorchvisionViT

    from mmlocat.utils.checkpoint_io import save_checkpoint
    from mmlocat.utils.converters import convert_torchvision_vit
    torch.manual_seed(0)
    source = TorchvisionViT(
        image_size=224,
        patch_size=16,
        num_layers=TINY['num_layers'],
        num_heads=2,
        hidden_dim=32,
        mlp_dim=64,
        num_classes=5).state_dict()
    ckpt = str(tmp_path / 'last.pth')
    save_checkpoint(convert_torchvision_vit(source), ckpt, meta={})
    model_cfg = tiny_model(load(name))
    model_cfg.backbone.init_cfg = load(name).model.backbone.init_cfg
    model_cfg.backbone.init_cfg.checkpoint = ckpt
    with DefaultScope.overwrite_default_scope('mmseg'):
        model = MODELS.build(model_cfg)
    model.init_weights()
    torch.testing.assert_close(model.backbone.pos_embed,
                               source['encoder.pos_embedding'])
    torch.testing.assert_close(
        model.backbone.layers[3].attn.qkv.weight,
        source['encoder.layers.encoder_layer_3.self_attention.in_proj_weight'])
    torch.testing.assert_close(model.backbone.ln1.weight,
                               source['encoder.ln.weight'])

    # a checkpoint with a missing block is refused, not half loaded
    del source['encoder.layers.encoder_layer_3.ln_1.weight']
    save_checkpoint(convert_torchvision_vit(source), ckpt, meta={})
    with DefaultScope.overwrite_default_scope('mmseg'):
        model = MODELS.build(model_cfg)
    with pytest.raises(RuntimeError, match='layers.3.ln1.weight'):
        model.init_weights()
