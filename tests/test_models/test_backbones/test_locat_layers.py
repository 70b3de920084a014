"""LocAtViT's block: the host's layer classes plus GAug, one gaug_cfg."""
import pytest
import torch
from helpers.tiny_archs import TINY_VIT
from mmpretrain.models.backbones.vision_transformer import \
    TransformerEncoderLayer
from mmpretrain.models.utils import MultiheadAttention

from mmlocat.models import LocAtViT
from mmlocat.models.backbones.locat_layers import (GAUG_CFG_DEFAULTS,
                                                   GAugAttention,
                                                   LocAtEncoderLayer,
                                                   build_gaug_cfg)

ARCH = TINY_VIT


def test_layers_subclass_the_host_with_its_parameter_names():
    layer = LocAtEncoderLayer(32, 2, 64, grid_size=(2, 2))
    host = TransformerEncoderLayer(32, 2, 64)
    assert isinstance(layer, TransformerEncoderLayer)
    assert isinstance(layer.attn, GAugAttention)
    assert isinstance(layer.attn, MultiheadAttention)
    ours = set(layer.state_dict())
    assert ours - set(host.state_dict()) == {
        'attn.gaug.log_var.weight', 'attn.gaug.log_var.bias',
        'attn.gaug.log_alpha.weight', 'attn.gaug.log_alpha.bias'
    }
    assert set(host.state_dict()) <= ours
    # gaug=False is exactly the host block.
    plain = LocAtEncoderLayer(32, 2, 64, grid_size=(2, 2), gaug=False)
    plain.load_state_dict(host.state_dict())
    x = torch.randn(2, 5, 32)
    torch.testing.assert_close(plain(x, (2, 2)), host(x))


def test_gaug_cfg_reaches_every_block():
    model = LocAtViT(
        ARCH, img_size=32, gaug_cfg=dict(impl='dense', clamp=False))
    for layer in model.layers:
        assert layer.attn.gaug_impl == 'dense'
        assert layer.attn.gaug_cfg == dict(
            GAUG_CFG_DEFAULTS, impl='dense', clamp=False)
        assert layer.attn.gaug.clamp is False


def test_no_per_option_gaug_arguments():
    """Only ``gaug_cfg``: the per-option keywords of an unreleased draft
    are not accepted."""
    for name in ('gaug_impl', 'gaug_clamp', 'gaug_precision', 'gaug_fast'):
        with pytest.raises(TypeError, match=name):
            LocAtViT(ARCH, img_size=32, **{name: None})


def test_gaug_cfg_errors():
    with pytest.raises(ValueError, match=r"unknown keys \['kernel'\]"):
        build_gaug_cfg(dict(kernel='dense'))
    with pytest.raises(
            ValueError, match=r'gaug_cfg=dict\(precision=\.\.\.\) must be'):
        build_gaug_cfg(dict(precision='fp16'))
    with pytest.raises(ValueError, match='dense GAug kernel'):
        build_gaug_cfg(dict(impl='chunked', fast=True))
    with pytest.raises(TypeError, match='gaug_kernel'):
        build_gaug_cfg(gaug_kernel='dense')
    with pytest.raises(ValueError, match='qk_scale'):
        GAugAttention(32, 2, (2, 2), qk_scale=0.5)


def test_init_weights_initialises_gaug_as_the_host_parameters():
    """init_weights (re)draws GAug's parameters, as it does the host's
    position embedding: small truncated-normal weights, zero biases."""
    model = LocAtViT(ARCH, img_size=32)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if '.gaug.' in name:
                param.fill_(5.)
    model.init_weights()
    for layer in model.layers:
        for linear in (layer.attn.gaug.log_var, layer.attn.gaug.log_alpha):
            # trunc_normal_(std=.02): nothing left of the 5s
            assert linear.weight.abs().max() < 0.2
            assert 0.005 < linear.weight.std() < 0.05
            assert (linear.bias == 0).all()
