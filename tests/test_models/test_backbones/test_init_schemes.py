"""From-scratch initialisation of the shipped classification recipes equals
the public code's, parameter by parameter, in distribution.

References are the real libraries at random init: timm's ViT-T (the public
LocAtViT is a timm ViT; its GAug linears are initialised by timm's own
``init_weights``) and torchvision's ``VisionTransformer`` (the public
LaSt-ViT). Names are mapped with the project's checkpoint converters, so
every parameter of the reference is compared with ours and vice versa.
"""
import copy
import math
import os.path as osp

import pytest
import timm
import torch
from helpers.tiny_archs import TINY_VIT
from mmengine.config import Config
from mmengine.registry import DefaultScope
from torch import nn
from torchvision.models.vision_transformer import \
    VisionTransformer as TorchvisionViT

import mmlocat  # noqa: F401
from mmlocat.models import LaStViT, LocAtViT
from mmlocat.utils.converters import convert_timm_locat
from mmlocat.utils.converters.last_vit import convert_torchvision_vit

REPO = osp.dirname(
    osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))
# Sampling tolerance in standard errors (a wrong scheme is off by >> 10).
Z = 6.
# The recipes' ViT-T at 3 blocks (the schemes do not depend on the depth;
# 12 blocks only make the test slower).
DEPTH = 3
TINY = dict(
    embed_dims=192, num_layers=DEPTH, num_heads=3, feedforward_channels=768)


def build_recipe(path: str, head: dict = dict(), **backbone) -> nn.Module:
    from mmpretrain.registry import MODELS
    cfg = Config.fromfile(osp.join(REPO, 'configs', path))
    model_cfg = copy.deepcopy(cfg.model)
    for part, values in (('backbone', backbone), ('head', head)):
        for key, value in values.items():  # replace, do not merge
            model_cfg[part][key] = value
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        model = MODELS.build(model_cfg)
    model.init_weights()
    return model


def stats(t: torch.Tensor) -> dict:
    """Moments of a tensor's values, without the rare +-2 outliers of
    ``trunc_normal_`` (cut at absolute +-2, which its inverse-CDF sampling
    in float32 hits now and then at std 0.02: one such value moves the std
    of 10^5 samples by several percent; timm and mmengine share it)."""
    t = t.detach().double().flatten()
    zero = bool((t == 0).all())
    const = bool((t == t[0]).all())
    if t.numel() > 1 and not const:
        scale = 1.4826 * (t - t.median()).abs().median()
        t = t[(t - t.median()).abs() <= 12 * scale]
    std = t.std().item() if t.numel() > 1 else 0.
    centred = (t - t.mean()).abs()
    return dict(
        n=t.numel(),
        mean=t.mean().item(),
        std=std,
        zero=zero,
        const=const,
        tail=(centred > 2 * std).double().mean().item() if std else 0.)


def assert_same_distribution(name: str, ours: torch.Tensor,
                             ref: torch.Tensor) -> None:
    """Equal shape; same zero-ness / constant; mean, std and the fraction
    beyond 2 std (normal 4.6%, uniform 0%) within sampling error."""
    assert ours.shape == ref.shape, name
    a, b = stats(ours), stats(ref)
    assert a['zero'] == b['zero'], (name, a, b)
    assert a['const'] == b['const'], (name, a, b)
    if b['const']:
        assert torch.equal(ours, ref), name
        return
    n = b['n']
    se_mean = math.sqrt((a['std']**2 + b['std']**2) / n)
    assert abs(a['mean'] - b['mean']) <= Z * se_mean, (name, a, b)
    assert abs(a['std'] / b['std'] - 1) <= Z / math.sqrt(2 * n), (name, a, b)
    if n >= 4096:
        p = max(b['tail'], 1e-3)
        bound = Z * math.sqrt(p * (1 - p) / n) + 2e-3
        assert abs(a['tail'] - b['tail']) <= bound, (name, a, b)


def compare_all(ours: dict, ref: dict) -> None:
    assert set(ours) == set(ref), (set(ours) ^ set(ref))
    for name in sorted(ref):
        assert_same_distribution(name, ours[name], ref[name])


class _GAugLinears(nn.Module):
    """The two linears of the public GaussianAugment (per-head dims)."""

    def __init__(self, head_dim: int) -> None:
        super().__init__()
        self.log_var = nn.Linear(head_dim, 2)
        self.log_alpha = nn.Linear(head_dim, 1)


def timm_reference(gaug: bool) -> dict:
    """timm ViT-T at random init, as the public LocAtViT (``gaug``) or its
    plain twin, renamed to our keys."""
    torch.manual_seed(0)
    ref = timm.create_model(
        'vit_tiny_patch16_224', num_classes=1000, depth=DEPTH)
    if gaug:
        for blk in ref.blocks:
            blk.attn.gaug = _GAugLinears(blk.attn.head_dim)
        ref.init_weights()  # timm's own routine reaches the GAug linears
    return convert_timm_locat(ref.state_dict())


def test_locat_register_tokens_match_timm():
    torch.manual_seed(0)
    ref = timm.create_model(
        'vit_tiny_patch16_224', num_classes=1000, reg_tokens=4, depth=DEPTH)
    model = build_recipe(
        'locat/vit-t_8xb128_in1k.py', arch=TINY, num_register_tokens=4)
    compare_all(model.state_dict(), convert_timm_locat(ref.state_dict()))


def torchvision_reference() -> dict:
    torch.manual_seed(0)
    ref = TorchvisionViT(
        image_size=224,
        patch_size=16,
        num_layers=DEPTH,
        num_heads=3,
        hidden_dim=192,
        mlp_dim=768,
        num_classes=1000)
    return convert_torchvision_vit(ref.state_dict())


@pytest.mark.parametrize(
    'path,head,reference', [
        ('locat/locat-t_8xb128_in1k.py', {}, lambda: timm_reference(True)),
        ('locat/vit-t_8xb128_in1k.py', {}, lambda: timm_reference(False)),
        ('last/last-b_8xb512_in1k.py', dict(in_channels=192),
         torchvision_reference),
        ('last/vit-b_8xb512_in1k.py', dict(in_channels=192),
         torchvision_reference),
    ],
    ids=['locat-t', 'vit-t', 'last-b', 'vit-b'])
def test_recipe_init_matches_public_code(path, head, reference):
    # LaSt-ViT's recipe at ViT-T size (the scheme does not depend on it).
    model = build_recipe(path, head=head, arch=TINY)
    compare_all(model.state_dict(), reference())


@pytest.mark.parametrize(
    'path,head,reference,names', [
        ('locat/locat-t_8xb128_in1k.py',
         dict(init_cfg=dict(type='Constant', layer='Linear', val=0)),
         lambda: timm_reference(True),
         ('backbone.layers.0.ffn.layers.0.0.weight', 'backbone.cls_token',
          'head.layers.head.weight')),
        ('last/last-b_8xb512_in1k.py', dict(in_channels=192),
         torchvision_reference, ('backbone.layers.0.attn.qkv.bias',
                                 'backbone.layers.0.attn.proj.bias',
                                 'backbone.patch_embed.projection.weight')),
    ],
    ids=['locat', 'last'])
def test_the_check_catches_the_host_scheme(path, head, reference, names):
    """The host's initialisation (init_cfg=None) is told apart: LocAtViT's
    MLPs (Xavier), zero CLS token and zero head differ from timm's;
    LaSt-ViT's kaiming-uniform qkv / proj with non-zero biases and narrower
    patch convolution differ from torchvision's."""
    model = build_recipe(path, head=head, arch=TINY, init_cfg=None)
    ref = reference()
    ours = model.state_dict()
    for name in names:
        with pytest.raises(AssertionError):
            assert_same_distribution(name, ours[name], ref[name])


def test_init_happens_in_init_weights():
    """Construction leaves the host's values; ``init_weights`` (which the
    runner calls) draws the scheme, reproducibly from the global seed."""
    path = osp.join(REPO, 'configs', 'locat', 'locat-t_8xb128_in1k.py')
    cfg = Config.fromfile(path).model
    from mmpretrain.registry import MODELS
    states = []
    for _ in range(2):
        with DefaultScope.overwrite_default_scope('mmpretrain'):
            model = MODELS.build(copy.deepcopy(cfg))
        assert torch.count_nonzero(model.backbone.cls_token) == 0
        torch.manual_seed(3)
        model.init_weights()
        assert torch.count_nonzero(model.backbone.cls_token) > 0
        states.append(model.state_dict())
    for k, v in states[0].items():
        assert torch.equal(v, states[1][k]), k


@pytest.mark.parametrize('cls,scheme', [(LocAtViT, 'TimmViTInit'),
                                        (LaStViT, 'TorchvisionViTInit')])
def test_pretrained_is_unchanged_by_the_schemes(tmp_path, cls, scheme):
    """A checkpoint start (the fine-tuning recipes) loads the exact values;
    the scheme only replaces a from-scratch init."""
    arch = TINY_VIT
    torch.manual_seed(1)
    src = cls(arch=arch, img_size=32, patch_size=16)
    src.init_weights()
    path = str(tmp_path / 'ckpt.pth')
    torch.save(src.state_dict(), path)
    model = cls(
        arch=arch,
        img_size=32,
        patch_size=16,
        init_cfg=dict(type='Pretrained', checkpoint=path))
    model.init_weights()
    for k, v in src.state_dict().items():
        assert torch.equal(model.state_dict()[k], v), k
    scheme_model = cls(
        arch=arch,
        img_size=32,
        patch_size=16,
        init_cfg=dict(type=f'mmlocat.{scheme}'))
    scheme_model.init_weights()
    assert not torch.equal(scheme_model.pos_embed, src.pos_embed)


def test_finetuning_configs_start_from_checkpoints():
    """A representative of each dense family loads its backbone from a
    checkpoint. (That no merged dense config, bases included, names a
    scheme is asserted where every such config is loaded anyway:
    tests/test_configs/test_seg_configs.py and test_pib_corloc_configs.py.)
    """
    for name in ('locat/upernet_locat-t_ade20k.py',
                 'locat/probe_vit-t_ade20k.py',
                 'last/upernet_last-b_ade20k.py'):
        cfg = Config.fromfile(osp.join(REPO, 'configs', name))
        assert cfg.model.backbone.init_cfg.type == 'Pretrained', name


def test_scheme_in_a_list_is_an_error():
    model = LocAtViT(
        arch='t',
        init_cfg=[
            dict(type='mmlocat.TimmViTInit'),
            dict(type='Constant', layer='LayerNorm', val=1.)
        ])
    with pytest.raises(ValueError, match='whole init_cfg'):
        model.init_weights()


def test_scheme_takes_no_arguments():
    from mmengine.model import initialize
    with pytest.raises(TypeError, match='takes no arguments'):
        initialize(nn.Linear(2, 2), dict(type='mmlocat.TimmViTInit', std=0.1))


def test_schemes_are_found_through_the_registry():
    """A scheme is any ``WEIGHT_INITIALIZERS`` entry of the scheme kind,
    whatever its scope or spelling; other initializers are not schemes."""
    from mmengine.registry import WEIGHT_INITIALIZERS as HOST

    from mmlocat.models.backbones.vit_init import TimmViTInit, names_scheme
    for cfg in (dict(type='mmlocat.TimmViTInit'), dict(type='TimmViTInit'),
                dict(type=TimmViTInit),
                dict(type='mmlocat.TorchvisionViTInit')):
        assert names_scheme(cfg), cfg
    for cfg in (None, dict(type='Pretrained', checkpoint='x'),
                dict(type='Normal', layer='Linear'), dict(type='NoSuchInit'),
                [dict(type='Constant', val=1.)]):
        assert not names_scheme(cfg), cfg
    assert HOST.get('TimmViTInit') is None  # mmlocat's scope only
