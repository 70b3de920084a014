"""GlobalPool against the stated math, and the one interface it gives.

References, written from ``docs/method.md`` (not from the library): the
patch score (cosine of each final-norm patch token with the query), PRR
(per-head softmax attention with q = k = v) and LazyStrike
(``helpers.references.spec_lazy_strike``, the public LAST-ViT code's
defaults). Then: every backbone's ``forward_with_scores`` and
``PatchScoreNeck`` give the same scores for the same tokens.
"""
import math

import pytest
import torch
from helpers.references import spec_lazy_strike
from helpers.tiny_archs import TINY_VIT

from mmlocat.models.backbones import CLIPViT, EVA02CLIPViT, LaStViT, LocAtViT
from mmlocat.models.layers import GlobalPool, lazy_strike_pool
from mmlocat.models.necks import PatchScoreNeck

C = 16


def _tokens(batch=2, prefix=2, h=3, w=4, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(batch, prefix + h * w, C, generator=gen)


def ref_cosine(patches, query):
    """``x_i . q / (|x_i| |q|)`` per patch, float64."""
    x, q = patches.double(), query.double()
    return (x @ q[:, :, None])[..., 0] / (
        x.norm(dim=-1) * q.norm(dim=-1)[:, None])


def ref_prr(x, heads):
    """PRR: per head of ``C / heads`` contiguous channels,
    ``softmax(X X^T / sqrt(d)) X``."""
    d = x.shape[-1] // heads
    out = []
    for j in range(heads):
        xh = x[..., j * d:(j + 1) * d]
        attn = torch.softmax(xh @ xh.transpose(1, 2) / math.sqrt(d), dim=-1)
        out.append(attn @ xh)
    return torch.cat(out, dim=-1)


def ref_global(tokens, prefix, pooling, prr_heads=None):
    x = tokens if prr_heads is None else ref_prr(tokens, prr_heads)
    if pooling == 'cls':
        return x[:, 0]
    if pooling == 'gap':
        return x[:, prefix:].mean(1)
    return spec_lazy_strike(x[:, prefix:])


@pytest.mark.parametrize('pooling', ['cls', 'gap', 'lazy_strike'])
@pytest.mark.parametrize('score_query', ['global', 'cls'])
@pytest.mark.parametrize('prr_heads', [None, 4])
def test_pooling_and_scores_follow_the_math(pooling, score_query, prr_heads):
    tokens, prefix = _tokens(), 2
    pool = GlobalPool(
        pooling, score_query=score_query, prr_heads=prr_heads).eval()
    want = ref_global(tokens, prefix, pooling, prr_heads)
    torch.testing.assert_close(pool(tokens, prefix), want)
    out = pool.scores(tokens, (3, 4), prefix)
    torch.testing.assert_close(out['global_token'], want)
    # the scored patches are the tokens as given (PRR touches the pool only)
    query = tokens[:, 0] if score_query == 'cls' else want
    cos = ref_cosine(tokens[:, prefix:], query).float()
    assert out['patch_score'].dtype == torch.float32
    torch.testing.assert_close(out['patch_score'], cos.reshape(2, 1, 3, 4))
    if pooling == 'lazy_strike':
        ref = lazy_strike_pool(tokens[:, prefix:])
        assert torch.equal(out['vote_map'], ref.votes.reshape(2, 1, 3, 4))
        assert out['vote_map'].sum().item() == 2 * C  # K = 1 per channel
    else:
        assert out['vote_map'] is None


def test_votes_on_request_and_lazy_strike_options():
    tokens = _tokens(prefix=1)
    pool = GlobalPool('cls', topk=None, topk_ratio=0.5)
    out = pool.scores(tokens, (3, 4), 1, votes=True)
    assert torch.equal(out['global_token'], tokens[:, 0])
    # 12 patches, K = 6 per channel
    assert torch.equal(out['vote_map'].sum((1, 2, 3)), torch.full((2, ),
                                                                  6. * C))
    pool = GlobalPool(
        'lazy_strike',
        topk=3,
        lazy_strike_score='paper',
        lazy_strike_window='centered')
    want = lazy_strike_pool(
        tokens[:, 1:], topk=3, score='paper', window='centered').pooled
    assert torch.equal(pool(tokens, 1), want)
    assert sum(p.numel() for p in pool.parameters()) == 0


def test_bad_options_and_inputs():
    with pytest.raises(ValueError, match="pooling must be one of.*'max'"):
        GlobalPool('max')
    with pytest.raises(ValueError, match='score_query'):
        GlobalPool(score_query='patch')
    with pytest.raises(ValueError, match='topk'):
        GlobalPool('lazy_strike', topk=0)
    with pytest.raises(ValueError, match='window'):
        GlobalPool(lazy_strike_window='hann')
    tokens = _tokens(prefix=0)
    with pytest.raises(ValueError, match="pooling='cls' needs a CLS"):
        GlobalPool('cls')(tokens, 0)
    with pytest.raises(ValueError, match="score_query='cls' needs a CLS"):
        GlobalPool('gap', score_query='cls').scores(tokens, (3, 4), 0)
    # registers without a CLS token are not one
    with pytest.raises(ValueError, match="pooling='cls' needs a CLS"):
        GlobalPool('cls')(_tokens(prefix=1), 1, has_cls=False)
    # GAP pools without a CLS token whatever score_query says
    GlobalPool('gap', score_query='cls')(tokens, 0)
    with pytest.raises(ValueError, match='grid'):
        GlobalPool('gap').scores(tokens, (4, 4), 0)
    with pytest.raises(ValueError, match='leaves no patch'):
        GlobalPool('gap')(tokens[:, :2], 2)
    with pytest.raises(ValueError, match=r'\(B, L, C\)'):
        GlobalPool('gap')(tokens[0], 0)


def _backbone(cls, pooling, score_query, **kwargs):
    torch.manual_seed(0)
    return cls(
        arch=dict(TINY_VIT, output_dims=8)
        if cls in (CLIPViT, EVA02CLIPViT) else TINY_VIT,
        img_size=32,
        patch_size=16,
        pooling=pooling,
        score_query=score_query,
        **kwargs).eval()


BACKBONES = [(LaStViT, {}), (CLIPViT, dict(act='gelu')), (EVA02CLIPViT, {}),
             (LocAtViT, dict(prr=False, num_register_tokens=1))]


@pytest.mark.parametrize('cls, kwargs', BACKBONES)
@pytest.mark.parametrize('pooling', ['cls', 'gap', 'lazy_strike'])
@pytest.mark.parametrize('score_query', ['global', 'cls'])
def test_backbones_and_neck_score_the_same_tokens_alike(
        cls, kwargs, pooling, score_query):
    """Every backbone's ``forward_with_scores`` equals ``PatchScoreNeck`` on
    the backbone's raw tokens, and its ``out_type='cls_token'`` output is
    the (projected) global token of the same pass."""
    if cls is LocAtViT and pooling == 'gap':
        # LocAtViT's GAP builds no CLS token (and no final norm)
        kwargs = dict(kwargs, final_norm=True)
        if score_query == 'cls':
            model = _backbone(cls, pooling, score_query, **kwargs)
            with pytest.raises(ValueError, match="score_query='cls' needs"):
                model.forward_with_scores(torch.randn(1, 3, 32, 32))
            return
    model = _backbone(cls, pooling, score_query, **kwargs)
    x = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    prefix = model.num_extra_tokens
    neck = PatchScoreNeck(
        in_channels=32,
        mode='classification',
        pooling=pooling,
        score_query=score_query,
        num_prefix_tokens=prefix).eval()
    with torch.no_grad():
        got = model.forward_with_scores(x)
        (tokens, ), hw = model.forward_intermediates(x, [model.num_layers - 1])
        want = neck.forward_with_scores((tokens, ))
        pooled = model(x)[0]
    assert hw == (4, 4)
    assert torch.equal(got['global_token'], want['global_token'])
    assert torch.equal(got['patch_score'], want['patch_score'])
    if model.out_type == 'cls_token':
        assert torch.equal(got['embedding'], pooled)
    else:  # LocAtViT's GAP: the host's avg_featmap, a norm after the mean
        assert torch.equal(model.ln2(got['global_token']), pooled)
    # the backbone reports LazyStrike's votes for every pooling
    votes = lazy_strike_pool(tokens[:, prefix:]).votes.reshape(2, 1, 4, 4)
    assert torch.equal(got['vote_map'], votes)
    if pooling == 'lazy_strike':
        assert torch.equal(want['vote_map'], votes)
    # and the math, independently
    torch.testing.assert_close(got['global_token'],
                               ref_global(tokens, prefix, pooling))
    query = tokens[:, 0] if score_query == 'cls' else got['global_token']
    torch.testing.assert_close(got['patch_score'].flatten(1),
                               ref_cosine(tokens[:, prefix:], query).float())


def test_locat_prr_refines_the_global_token_only():
    model = _backbone(LocAtViT, 'cls', 'global')  # prr=True by default
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        out = model.forward_with_scores(x)
        (tokens, ), _ = model.forward_intermediates(x, [1])
        pooled = model(x)[0]
    want = ref_prr(tokens, 2)[:, 0]
    torch.testing.assert_close(out['global_token'], want)
    assert torch.equal(pooled, out['global_token'])
    torch.testing.assert_close(out['patch_score'].flatten(1),
                               ref_cosine(tokens[:, 1:], want).float())


def test_locat_lazy_strike_is_one_option():
    model = _backbone(LocAtViT, 'lazy_strike', 'global', prr=False)
    assert model.cls_token is not None and model.final_norm
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        (tokens, ), _ = model.forward_intermediates(x, [1])
        pooled = model(x)[0]
    torch.testing.assert_close(pooled, spec_lazy_strike(tokens[:, 1:]))
