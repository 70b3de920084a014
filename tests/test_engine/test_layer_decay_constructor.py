"""LayerDecayOptimWrapperConstructor: exact lr scales and no-decay groups.

A tiny 2-block LocAtViT (with register tokens) sits inside mmseg's
``EncoderDecoder``, an mmdet ``RetinaNet`` and an mmpretrain
``ImageClassifier``. The expected depth of every parameter is written out
by hand here (stem 0, block i -> i + 1, final norm and everything outside
the backbone -> 3 of max depth 4), independent of ``get_layer_depth``.
"""
import re

import pytest
import torch
import torch.distributed as dist
from helpers.tiny_archs import TINY_VIT
from mmengine.model import BaseModel, MMDistributedDataParallel
from mmengine.optim import build_optim_wrapper
from mmengine.registry import DefaultScope

import mmlocat  # noqa: F401
from mmlocat.engine import LayerDecayOptimWrapperConstructor

TINY = TINY_VIT
LR, DECAY, WD = 2.0, 0.5, 0.05  # powers of two: scales compare exactly
OPTIM = dict(
    type='OptimWrapper',
    optimizer=dict(type='SGD', lr=LR, weight_decay=WD),
    constructor='mmlocat.LayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=DECAY))


def locat_backbone(**kwargs):
    cfg = dict(
        type='mmlocat.LocAtViT',
        arch=TINY,
        img_size=32,
        num_register_tokens=2,
        out_type='featmap',
        out_indices=(0, 1))
    cfg.update(kwargs)
    return cfg


def expected_depth(name):
    """Depth of max 4 by hand: what BEiT-style decay should give."""
    if not name.startswith('backbone.'):
        return 3
    name = name[len('backbone.'):]
    if name in ('cls_token', 'pos_embed', 'reg_token'):
        return 0
    if name.startswith('patch_embed.'):
        return 0
    block = re.match(r'layers\.(\d+)\.', name)
    if block:
        return int(block.group(1)) + 1
    return 3  # final norm


def expected_decay(name, param):
    if param.ndim == 1:  # biases, norms, GAug linear biases
        return False
    return not any(
        name.endswith(n) for n in ('pos_embed', 'cls_token', 'reg_token'))


def build_model(scope, cfg):
    with DefaultScope.overwrite_default_scope(scope):
        if scope == 'mmseg':
            from mmseg.registry import MODELS
        elif scope == 'mmdet':
            from mmdet.registry import MODELS
        else:
            from mmpretrain.registry import MODELS
        return MODELS.build(cfg)


def seg_model(**backbone):
    return build_model(
        'mmseg',
        dict(
            type='EncoderDecoder',
            backbone=locat_backbone(**backbone),
            decode_head=dict(
                type='FCNHead',
                in_channels=32,
                in_index=1,
                channels=8,
                num_convs=1,
                num_classes=3,
                norm_cfg=dict(type='BN')),
            auxiliary_head=dict(
                type='FCNHead',
                in_channels=32,
                in_index=0,
                channels=8,
                num_convs=1,
                num_classes=3)))


def det_model():
    return build_model(
        'mmdet',
        dict(
            type='RetinaNet',
            data_preprocessor=dict(type='DetDataPreprocessor'),
            backbone=locat_backbone(out_indices=(1, )),
            neck=dict(
                type='FPN', in_channels=[32], out_channels=16, num_outs=1),
            bbox_head=dict(
                type='RetinaHead',
                num_classes=2,
                in_channels=16,
                feat_channels=16,
                stacked_convs=1,
                anchor_generator=dict(
                    type='AnchorGenerator',
                    octave_base_scale=4,
                    scales_per_octave=1,
                    ratios=[1.0],
                    strides=[16]),
                bbox_coder=dict(
                    type='DeltaXYWHBBoxCoder',
                    target_means=[0.0] * 4,
                    target_stds=[1.0] * 4),
                loss_cls=dict(type='FocalLoss', use_sigmoid=True),
                loss_bbox=dict(type='L1Loss'))))


def cls_model():
    return build_model(
        'mmpretrain',
        dict(
            type='ImageClassifier',
            backbone=locat_backbone(out_type='cls_token', out_indices=-1),
            head=dict(
                type='VisionTransformerClsHead', num_classes=3,
                in_channels=32)))


def groups_by_param(optimizer):
    found = {}
    for group in optimizer.param_groups:
        for p in group['params']:
            assert id(p) not in found, 'parameter in two groups'
            found[id(p)] = group
    return found


def check_groups(model, optimizer):
    found = groups_by_param(optimizer)
    trainable = [(n, p) for n, p in model.named_parameters()
                 if p.requires_grad]
    assert len(found) == len(trainable)
    for name, param in trainable:
        group = found[id(param)]
        scale = DECAY**(3 - expected_depth(name))
        assert group['lr'] == LR * scale, name
        assert group['lr_scale'] == scale, name
        wd = WD if expected_decay(name, param) else 0.
        assert group['weight_decay'] == wd, name
        assert name in group['param_names']


@pytest.mark.parametrize('make', [seg_model, det_model, cls_model])
def test_exact_scales_in_every_host(make):
    model = make()
    optimizer = build_optim_wrapper(model, OPTIM).optimizer
    check_groups(model, optimizer)
    names = dict(model.named_parameters())
    found = groups_by_param(optimizer)
    # no decay: the default no-decay names (position embedding, CLS and
    # register tokens) and 1-D parameters (norms, biases, GAug's biases)
    for name in ('backbone.pos_embed', 'backbone.cls_token',
                 'backbone.reg_token', 'backbone.layers.0.ln1.weight',
                 'backbone.layers.1.attn.gaug.log_var.bias',
                 'backbone.layers.1.attn.gaug.log_alpha.bias'):
        assert found[id(names[name])]['weight_decay'] == 0., name
    gaug_w = found[id(names['backbone.layers.1.attn.gaug.log_var.weight'])]
    assert gaug_w['weight_decay'] == WD
    assert gaug_w['lr'] == LR * DECAY  # block 1 of 2: depth 2 of 4
    stem = found[id(names['backbone.patch_embed.projection.weight'])]
    assert stem['lr'] == LR * DECAY**3


def test_groups_are_shared_and_ordered():
    model = cls_model()
    groups = build_optim_wrapper(model, OPTIM).optimizer.param_groups
    keys = [(g['lr_scale'], g['weight_decay']) for g in groups]
    assert len(keys) == len(set(keys))  # one group per (scale, decay)
    assert [k[0] for k in keys] == sorted(k[0] for k in keys)


def test_frozen_parameters_are_left_out():
    model = seg_model(frozen_stages=1)
    optimizer = build_optim_wrapper(model, OPTIM).optimizer
    found = groups_by_param(optimizer)
    frozen = model.backbone.layers[0].attn.qkv.weight
    assert not frozen.requires_grad and id(frozen) not in found
    check_groups(model, optimizer)


def test_sgd_step_honours_the_groups():
    torch.manual_seed(0)
    model = cls_model()
    optimizer = build_optim_wrapper(model, OPTIM).optimizer
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    model.zero_grad()
    feats = model.extract_feat(torch.rand(2, 3, 32, 32))
    model.head(feats).pow(2).sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    optimizer.step()
    for name in ('backbone.layers.0.attn.qkv.weight',
                 'backbone.layers.1.attn.gaug.log_var.bias',
                 'backbone.pos_embed', 'head.layers.head.weight'):
        param = dict(model.named_parameters())[name]
        lr = LR * DECAY**(3 - expected_depth(name))
        wd = WD if expected_decay(name, param) else 0.
        want = before[name] - lr * (grads[name] + wd * before[name])
        torch.testing.assert_close(param.detach(), want)
        assert not torch.equal(param.detach(), before[name])


@pytest.fixture
def gloo_group(tmp_path):
    store = dist.FileStore(str(tmp_path / 'store'), 1)
    dist.init_process_group('gloo', store=store, rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_model_wrapper(gloo_group):
    model = seg_model()
    wrapped = MMDistributedDataParallel(module=model, device_ids=None)
    optimizer = build_optim_wrapper(wrapped, OPTIM).optimizer
    check_groups(model, optimizer)
    # the wrapper branch of add_params itself
    constructor = LayerDecayOptimWrapperConstructor(
        dict(type='OptimWrapper', optimizer=OPTIM['optimizer']),
        OPTIM['paramwise_cfg'])
    params = []
    constructor.add_params(params, wrapped)
    direct = []
    constructor.add_params(direct, model)
    names = [g['param_names'] for g in params]
    assert names == [g['param_names'] for g in direct]


@pytest.mark.parametrize(
    'paramwise_cfg, error, match',
    [(dict(), ValueError, 'layer_decay_rate'),
     (dict(layer_decay_rate=0.), ValueError, r'\(0, 1\]'),
     (dict(layer_decay_rate=1.5), ValueError, r'\(0, 1\]'),
     (dict(layer_decay_rate=True), ValueError, 'layer_decay_rate'),
     (dict(layer_decay_rate='0.65'), ValueError, 'layer_decay_rate'),
     (dict(layer_decay_rate=0.65,
           decay_mult=0.), ValueError, 'unknown paramwise_cfg keys'),
     (dict(layer_decay_rate=0.65,
           no_decay_names='pos_embed'), TypeError, 'no_decay_names'),
     ('layer_decay_rate=0.65', TypeError, 'paramwise_cfg')])
def test_bad_paramwise_cfg(paramwise_cfg, error, match):
    cfg = dict(OPTIM, paramwise_cfg=paramwise_cfg)
    with pytest.raises(error, match=match):
        build_optim_wrapper(cls_model(), cfg)


def test_missing_paramwise_cfg_is_an_error():
    cfg = {k: v for k, v in OPTIM.items() if k != 'paramwise_cfg'}
    with pytest.raises(ValueError, match='layer_decay_rate'):
        build_optim_wrapper(cls_model(), cfg)


def test_custom_no_decay_names():
    cfg = dict(
        OPTIM,
        paramwise_cfg=dict(
            layer_decay_rate=DECAY, no_decay_names=['qkv.weight']))
    model = cls_model()
    found = groups_by_param(build_optim_wrapper(model, cfg).optimizer)
    names = dict(model.named_parameters())
    qkv = names['backbone.layers.0.attn.qkv.weight']
    assert found[id(qkv)]['weight_decay'] == 0.
    # replaced, not extended: pos_embed decays now
    assert found[id(names['backbone.pos_embed'])]['weight_decay'] == WD


class NoDepthModel(BaseModel):

    def __init__(self):
        super().__init__()
        self.backbone = torch.nn.Conv2d(3, 4, 3)

    def forward(self, *args, **kwargs):
        return self.backbone(*args)


class NoBackboneModel(BaseModel):

    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.Linear(3, 4)

    def forward(self, *args, **kwargs):
        return self.encoder(*args)


@pytest.mark.parametrize('model_cls', [NoDepthModel, NoBackboneModel])
def test_backbone_without_get_layer_depth(model_cls):
    with pytest.raises(TypeError, match='get_layer_depth'):
        build_optim_wrapper(model_cls(), OPTIM)
