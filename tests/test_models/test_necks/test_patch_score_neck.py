"""PatchScoreNeck: pyramid, scores, zero-init modulation, host builds."""
import pytest
import torch
import torch.nn.functional as F

from mmlocat.models.layers import lazy_strike_pool, patch_score
from mmlocat.models.necks import PatchScoreNeck

C = 16


def _feat(h=4, w=6, batch=2, seed=0):
    return torch.randn(
        batch, C, h, w, generator=torch.Generator().manual_seed(seed))


def _tokens(x):
    return x.flatten(2).transpose(1, 2)


def test_pyramid_shapes_and_channels():
    neck = PatchScoreNeck(in_channels=C, out_channels=8)
    outs = neck((_feat(), ))
    assert [tuple(o.shape) for o in outs] == [(2, 8, 16, 24), (2, 8, 8, 12),
                                              (2, 8, 4, 6), (2, 8, 2, 3)]
    neck = PatchScoreNeck(in_channels=C, scales=(2, 1, 0.25))
    outs = neck((_feat(h=8, w=8), ))
    assert [tuple(o.shape) for o in outs] == [(2, C, 16, 16), (2, C, 8, 8),
                                              (2, C, 2, 2)]
    # identity level without out_channels is the input itself (gamma = 0)
    x = _feat()
    assert torch.equal(PatchScoreNeck(in_channels=C)((x, ))[2], x)


def test_multi_input_levels_and_norm():
    neck = PatchScoreNeck(
        in_channels=[C] * 4,
        out_channels=8,
        norm_cfg=dict(type='BN'),
        scales=(4, 2, 1, 0.5)).eval()
    inputs = tuple(_feat(seed=i) for i in range(4))
    outs = neck(inputs)
    assert [tuple(o.shape[-2:]) for o in outs] == [(16, 24), (8, 12), (4, 6),
                                                   (2, 3)]
    with pytest.raises(ValueError, match='give 1 or as many'):
        neck(inputs[:2])


def test_zero_init_equals_plain_pyramid_and_gamma_gets_grad():
    torch.manual_seed(0)
    neck = PatchScoreNeck(in_channels=C, out_channels=8)
    plain = PatchScoreNeck(in_channels=C, out_channels=8, modulate=False)
    state = {k: v for k, v in neck.state_dict().items() if k != 'gamma'}
    plain.load_state_dict(state, strict=True)
    assert torch.equal(neck.gamma, torch.zeros(4))
    assert not hasattr(plain, 'gamma')
    x = _feat()
    outs, ref = neck((x, )), plain((x, ))
    for a, b in zip(outs, ref):
        assert torch.equal(a, b)
    loss = sum((o * torch.randn_like(o)).sum() for o in outs)
    loss.backward()
    assert neck.gamma.grad is not None
    assert (neck.gamma.grad.abs() > 0).all()


def test_modulation_formula():
    torch.manual_seed(0)
    neck = PatchScoreNeck(in_channels=C, out_channels=8)
    with torch.no_grad():
        neck.gamma.copy_(torch.tensor([0.5, -1., 2., 0.25]))
    x = _feat()
    result = neck.forward_with_scores((x, ))
    s = result['patch_score']
    for i, out in enumerate(result['outs']):
        base = neck.out_convs[i](neck.rescales[i](x))
        resized = F.interpolate(
            s, size=base.shape[-2:], mode='bilinear', align_corners=False)
        torch.testing.assert_close(out, base * (1 + neck.gamma[i] * resized))


def test_scores_lazy_strike_gap_cls():
    x = _feat()
    tokens = _tokens(x)
    neck = PatchScoreNeck(in_channels=C, topk=2)
    res = neck.forward_with_scores((x, ))
    ref = lazy_strike_pool(tokens, topk=2)
    torch.testing.assert_close(res['global_token'], ref.pooled)
    torch.testing.assert_close(res['vote_map'], ref.votes.reshape(2, 1, 4, 6))
    assert res['vote_map'].sum(dim=(1, 2, 3)).tolist() == [2. * C] * 2
    torch.testing.assert_close(
        res['patch_score'],
        patch_score(tokens, ref.pooled).reshape(2, 1, 4, 6))

    gap = PatchScoreNeck(in_channels=C, pooling='gap')
    res = gap.forward_with_scores((x, ))
    torch.testing.assert_close(res['global_token'], tokens.mean(1))
    assert res['vote_map'] is None

    cls_token = torch.randn(2, C)
    cls = PatchScoreNeck(in_channels=C, pooling='cls')
    res = cls.forward_with_scores(((x, cls_token), ))
    assert torch.equal(res['global_token'], cls_token)
    torch.testing.assert_close(
        res['patch_score'],
        F.cosine_similarity(tokens, cls_token[:, None],
                            dim=-1).reshape(2, 1, 4, 6))
    with pytest.raises(ValueError, match='global token'):
        cls((x, ))


def test_raw_tokens_input():
    raw = torch.randn(2, 1 + 16, C)  # CLS + a 4x4 grid
    neck = PatchScoreNeck(in_channels=C, pooling='cls', mode='classification')
    res = neck.forward_with_scores((raw, ))
    assert torch.equal(res['global_token'], raw[:, 0])
    assert torch.equal(res['outs'][0], raw[:, 0])
    grid = raw[:, 1:].transpose(1, 2).reshape(2, C, 4, 4)
    torch.testing.assert_close(
        res['patch_score'],
        patch_score(raw[:, 1:], raw[:, 0]).reshape(2, 1, 4, 4))
    pyramid = PatchScoreNeck(in_channels=C, pooling='cls')
    assert torch.equal(pyramid((raw, ))[2], grid)
    with pytest.raises(ValueError, match='square'):
        neck((torch.randn(2, 1 + 12, C), ))


def test_classification_mode_has_no_pyramid():
    neck = PatchScoreNeck(in_channels=C, mode='classification')
    assert not any(True for _ in neck.parameters())
    x = _feat()
    (out, ) = neck((_feat(seed=5), x))  # the last input is scored
    torch.testing.assert_close(out, lazy_strike_pool(_tokens(x)).pooled)


@pytest.mark.parametrize('kwargs, match', [
    (dict(scales=(3, 1)), 'powers of two'),
    (dict(scales=()), 'empty'),
    (dict(mode='dense'), 'mode'),
    (dict(pooling='max'), 'pooling'),
    (dict(in_channels=[C, C]), 'entries'),
])
def test_bad_config(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PatchScoreNeck(**{'in_channels': C, **kwargs})


def test_bad_inputs():
    neck = PatchScoreNeck(in_channels=C)
    with pytest.raises(TypeError):
        neck(_feat())  # not a tuple
    with pytest.raises(ValueError, match='pair'):
        neck(((_feat(), torch.randn(2, C + 1)), ))
    with pytest.raises(ValueError, match='shape'):
        neck((torch.randn(2, C), ))
    # Non-finite features raise in inference (eval mode); training leaves
    # them to the loss (no host sync, see test_layers/test_finite.py).
    nan = torch.full((1, C, 2, 2), float('nan'))
    neck.train()(((nan, )))
    with torch.no_grad(), pytest.raises(ValueError, match='NaN'):
        neck.eval()((nan, ))


@pytest.mark.parametrize('host', ['mmpretrain', 'mmseg', 'mmdet'])
def test_build_from_host_registries(host):
    import importlib

    import mmlocat  # noqa: F401
    registry = importlib.import_module(f'{host}.registry').MODELS
    neck = registry.build(
        dict(type='mmlocat.PatchScoreNeck', in_channels=C, out_channels=8))
    assert isinstance(neck, PatchScoreNeck)
    assert len(neck((_feat(), ))) == 4
