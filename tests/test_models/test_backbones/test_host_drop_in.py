"""LocAtViT and LaStViT as drop-ins for mmpretrain's ``VisionTransformer``.

The cases of mmpretrain's own ``test_vision_transformer.py`` (structure,
init, checkpoint load with position-embedding resize, every ``out_type``,
dynamic input sizes), run on both backbones and, where a number is
compared, on the host class built with the same arguments.
"""
import math

import pytest
import timm.layers
import torch
from helpers.tiny_archs import tiny_vit
from mmengine.runner import load_checkpoint, save_checkpoint
from mmpretrain.models.backbones import VisionTransformer
from mmpretrain.models.utils import LayerScale

from mmlocat.models import LaStViT, LocAtViT

ARCH = tiny_vit(num_layers=3, num_heads=4)
BACKBONES = [LocAtViT, LaStViT]


def build(cls, **kwargs):
    cfg = dict(arch=ARCH, img_size=32, patch_size=8, drop_path_rate=0.1)
    cfg.update(kwargs)
    return cls(**cfg)


@pytest.mark.parametrize('cls', BACKBONES)
def test_structure(cls):
    with pytest.raises(AssertionError, match='not in default archs'):
        build(cls, arch='unknown')
    with pytest.raises(AssertionError, match='Custom arch needs'):
        build(
            cls, arch=dict(num_layers=3, num_heads=4, feedforward_channels=64))
    model = build(cls, arch=dict(ARCH, num_heads=2, embed_dims=16))
    assert model.embed_dims == 16 and model.num_layers == 3
    for layer in model.layers:
        assert layer.attn.num_heads == 2
        assert layer.ffn.feedforward_channels == 64
    # out_indices refused the host's way (and with our more exact types)
    with pytest.raises(AssertionError, match="get <class 'dict'>"):
        build(cls, out_indices={1: 1})
    with pytest.raises(TypeError, match="get <class 'dict'>"):
        build(cls, out_indices={1: 1})
    with pytest.raises(AssertionError, match='Invalid out_indices 4'):
        build(cls, out_indices=[0, 4])
    with pytest.raises(ValueError, match='Invalid out_indices 4'):
        build(cls, out_indices=[0, 4])
    # stochastic depth: linear over the blocks, in attention and MLP
    model = build(cls)
    for i, layer in enumerate(model.layers):
        assert layer.attn.out_drop.drop_prob == pytest.approx(0.1 * i / 2)
        assert layer.ffn.dropout_layer.drop_prob == pytest.approx(0.1 * i / 2)
    assert isinstance(model.pre_norm, torch.nn.Identity)
    assert model.patch_embed.projection.bias is not None
    model = build(cls, pre_norm=True)
    assert isinstance(model.pre_norm, torch.nn.LayerNorm)
    assert model.patch_embed.projection.bias is None  # as the host


@pytest.mark.parametrize('cls', BACKBONES)
def test_layer_scale_and_layer_cfgs(cls):
    model = build(cls, layer_scale_init_value=0.1)
    host = build(VisionTransformer, layer_scale_init_value=0.1)
    for layer, host_layer in zip(model.layers, host.layers):
        assert isinstance(layer.attn.gamma1, LayerScale)
        assert type(layer.ffn.gamma2) is type(host_layer.ffn.gamma2)
        assert not isinstance(host_layer.ffn.gamma2, torch.nn.Identity)
        torch.testing.assert_close(
            layer.state_dict(),
            host_layer.state_dict() | {
                k: v
                for k, v in layer.state_dict().items()
                if k.startswith('attn.gaug.')
            },
            rtol=0,
            atol=1e9)
    model = build(
        cls,
        layer_cfgs=[dict(feedforward_channels=16 * (i + 1)) for i in range(3)])
    assert [layer.ffn.feedforward_channels
            for layer in model.layers] == [16, 32, 48]


@pytest.mark.parametrize('cls', BACKBONES)
def test_init_weights_and_load_with_resize(cls, tmp_path):
    model = build(
        cls,
        init_cfg=[
            dict(
                type='Kaiming',
                layer='Conv2d',
                mode='fan_in',
                nonlinearity='linear')
        ])
    before = model.patch_embed.projection.weight.clone()
    # As the host: the position embedding is zero until init_weights.
    assert (model.pos_embed == 0).all()
    model.init_weights()
    assert not torch.allclose(before, model.patch_embed.projection.weight)
    assert not (model.pos_embed == 0).all()

    checkpoint = str(tmp_path / 'vit.pth')
    save_checkpoint(model.state_dict(), checkpoint)
    fresh = build(cls)
    load_checkpoint(fresh, checkpoint, strict=True)
    torch.testing.assert_close(fresh.pos_embed, model.pos_embed)

    larger = build(cls, img_size=48)
    load_checkpoint(larger, checkpoint, strict=True)
    # LocAtViT resamples as timm (antialiased, what its checkpoints were
    # trained with), LaStViT as the host (mmpretrain's resize_pos_embed).
    expected = timm.layers.resample_abs_pos_embed(
        model.pos_embed.detach(), [6, 6], [4, 4],
        num_prefix_tokens=1,
        antialias=cls is LocAtViT)
    torch.testing.assert_close(larger.pos_embed, expected)


@pytest.mark.parametrize('cls', BACKBONES)
def test_forward_out_types(cls):
    torch.manual_seed(0)
    imgs = torch.randn(1, 3, 32, 32)
    with pytest.raises(ValueError, match='with_cls_token must be True'):
        build(cls, with_cls_token=False, out_type='cls_token')
    model = build(cls, with_cls_token=False, out_type='featmap')
    assert model.cls_token is None
    outs = model(imgs)
    assert isinstance(outs, tuple) and len(outs) == 1
    assert outs[0].shape == (1, 32, 4, 4)

    shapes = dict(
        raw=(1, 17, 32),
        cls_token=(1, 32),
        featmap=(1, 32, 4, 4),
        avg_featmap=(1, 32))
    for out_type, shape in shapes.items():
        model = build(cls, out_type=out_type)
        outs = model(imgs)
        assert len(outs) == 1 and outs[0].shape == shape, out_type

    model = build(cls, out_indices=[-3, -2, -1], out_type='featmap')
    outs = model(imgs)
    assert len(outs) == 3
    assert all(out.shape == (1, 32, 4, 4) for out in outs)

    model = build(cls, out_type='featmap')
    for size in [(32, 32), (40, 40), (40, 49)]:
        (out, ) = model(torch.randn(1, 3, *size))
        assert out.shape == (1, 32, math.ceil(size[0] / 8),
                             math.ceil(size[1] / 8))


@pytest.mark.parametrize('cls', BACKBONES)
def test_raw_and_featmap_equal_the_host_without_additions(cls):
    """With nothing of their own switched on, both compute the host's
    network: same parameters, same outputs (LocAtViT's timm-style
    antialiased resampling of the position embedding switched off)."""
    extra = dict(
        gaug=False,
        prr=False,
        pos_embed_cfg=dict(resample='timm',
                           antialias=False)) if cls is LocAtViT else dict(
                               pooling='cls')
    for out_type in ('raw', 'featmap', 'cls_token', 'avg_featmap'):
        torch.manual_seed(0)
        host = build(VisionTransformer, out_type=out_type, out_indices=[1, 2])
        host.init_weights()
        host.eval()
        model = build(
            cls, out_type=out_type, out_indices=[1, 2], **extra).eval()
        model.load_state_dict(host.state_dict())
        x = torch.randn(2, 3, 40, 32)
        with torch.no_grad():
            for out, ref in zip(model(x), host(x)):
                torch.testing.assert_close(out, ref)


@pytest.mark.parametrize('cls', BACKBONES)
def test_frozen_stages(cls):
    model = build(cls, frozen_stages=1)
    host = build(VisionTransformer, frozen_stages=1)
    ours = dict(model.named_modules())
    for name, module in host.named_modules():
        assert ours[name].training == module.training, name
    # Unlike the host's ViT, train() keeps the frozen part in eval mode.
    model.train()
    assert not model.patch_embed.training
    assert not model.layers[0].training and model.layers[1].training
    frozen = [
        model.pos_embed, model.cls_token, *model.patch_embed.parameters(),
        *model.layers[0].parameters()
    ]
    assert not any(p.requires_grad for p in frozen)
    assert all(p.requires_grad for p in model.layers[1].parameters())
    with pytest.raises(ValueError, match='frozen_stages'):
        build(cls, frozen_stages=4)
