"""Every ViT backbone resamples a checkpoint's position embedding of
another grid by its ``pos_embed_cfg`` (``TokenLoopViT._prepare_pos_embed``),
and the default ``resample='host'`` is what mmpretrain's own
``VisionTransformer._prepare_pos_embed`` does, value for value."""
import copy

import pytest
import torch
from helpers.tiny_archs import TINY_VIT
from mmpretrain.models.backbones import VisionTransformer

from mmlocat.models.backbones import CLIPViT, EVA02CLIPViT, LaStViT, LocAtViT
from mmlocat.models.backbones.pos_embed import (dino_resample_pos_embed,
                                                resample_abs_pos_embed)

HOST = dict(resample='host')
BACKBONES = [
    (LaStViT, {}),
    (CLIPViT, dict(act='gelu')),
    (EVA02CLIPViT, {}),
    (LocAtViT, dict(pos_embed_cfg=HOST)),
]


def _build(cls, img_size, **kwargs):
    torch.manual_seed(img_size)
    return cls(arch=TINY_VIT, img_size=img_size, patch_size=16, **kwargs)


def _checkpoint(cls, kwargs):
    """A 2x2-grid model's state dict with a random position embedding."""
    state = _build(cls, 32, **kwargs).state_dict()
    state['pos_embed'] = torch.randn(state['pos_embed'].shape)
    return state


@pytest.mark.parametrize('cls, kwargs', BACKBONES)
def test_default_host_rule_is_the_hosts(cls, kwargs):
    state = _checkpoint(cls, kwargs)
    model = _build(cls, 64, **kwargs)
    model.load_state_dict(copy.deepcopy(state), strict=True)
    # the host's own hook on the same model and checkpoint
    host_state = copy.deepcopy(state)
    VisionTransformer._prepare_pos_embed(
        _build(cls, 64, **kwargs), host_state, '')
    assert model.pos_embed.shape == (1, 1 + 16, 32)
    assert torch.equal(model.pos_embed, host_state['pos_embed'])


@pytest.mark.parametrize('cls, kwargs', BACKBONES[:3])
@pytest.mark.parametrize('rule', ['timm', 'dino'])
def test_other_rules_are_followed_on_loading(cls, kwargs, rule):
    state = _checkpoint(cls, kwargs)
    model = _build(cls, 64, pos_embed_cfg=dict(resample=rule), **kwargs)
    model.load_state_dict(copy.deepcopy(state), strict=True)
    if rule == 'timm':
        want = resample_abs_pos_embed(state['pos_embed'], (2, 2), (4, 4), 1)
    else:
        want = dino_resample_pos_embed(state['pos_embed'], (2, 2), (4, 4), 1)
    assert torch.equal(model.pos_embed, want)
    host = _build(cls, 64, **kwargs)
    host.load_state_dict(copy.deepcopy(state), strict=True)
    assert not torch.allclose(model.pos_embed, host.pos_embed)


def test_gap_drops_the_checkpoints_cls_embedding():
    """A CLS-free model drops a checkpoint's CLS embedding: at the same grid
    as the host does; at another grid (where the host's hook fails) and then
    resamples the rest as the host would."""
    kwargs = dict(pos_embed_cfg=HOST, pooling='gap')
    with_cls = _checkpoint(LocAtViT, dict(pos_embed_cfg=HOST))
    for img_size in (32, 64):
        model = _build(LocAtViT, img_size, **kwargs)
        state = dict(with_cls)
        model._prepare_pos_embed(state, '')
        host_state = dict(with_cls)
        if img_size == 64:
            host_state['pos_embed'] = with_cls['pos_embed'][:, 1:]
        VisionTransformer._prepare_pos_embed(model, host_state, '')
        assert state['pos_embed'].shape == model.pos_embed.shape
        assert torch.equal(state['pos_embed'], host_state['pos_embed'])


def test_non_square_source_grid_is_refused_with_a_message():
    model = _build(LaStViT, 64)
    state = model.state_dict()
    state['pos_embed'] = torch.randn(1, 1 + 6, 32)
    with pytest.raises(
            ValueError, match='6 patch positions are not a '
            'square grid'):
        model.load_state_dict(state)
