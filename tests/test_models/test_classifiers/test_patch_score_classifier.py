"""PatchScoreClassifier attaches the right patch scores to predictions."""
import pytest
import torch
from helpers.tiny_archs import tiny_vit
from mmpretrain.registry import MODELS
from mmpretrain.structures import DataSample

import mmlocat  # noqa: F401
from mmlocat.models.layers import patch_score

ARCH = tiny_vit(num_layers=1)
HEAD = dict(type='VisionTransformerClsHead', num_classes=5, in_channels=32)


def _build(backbone, neck=None, head=HEAD):
    torch.manual_seed(0)
    model = MODELS.build(
        dict(
            type='mmlocat.PatchScoreClassifier',
            backbone=backbone,
            neck=neck,
            head=head))
    return model.eval()


def _images(h=64, w=48):
    return torch.randn(2, 3, h, w, generator=torch.Generator().manual_seed(1))


def test_lastvit_backbone_scores_and_same_logits():
    model = _build(
        dict(type='mmlocat.LaStViT', arch=ARCH, img_size=64, patch_size=16))
    x = _images()
    with torch.no_grad():
        preds = model.predict(x)
        ref = model.backbone.forward_with_scores(x)
        logits = model(x, mode='tensor')  # the plain ImageClassifier path
    assert len(preds) == 2
    for i, pred in enumerate(preds):
        assert pred.patch_score.shape == (4, 3)
        torch.testing.assert_close(pred.patch_score, ref['patch_score'][i, 0])
        torch.testing.assert_close(pred.vote_map, ref['vote_map'][i, 0])
        assert pred.vote_map.sum() == 32  # K = 1 vote per channel
        torch.testing.assert_close(pred.pred_score, logits[i].softmax(-1))


def _old_hook_rule(backbone, x):
    """The scores the classifier computed for a backbone without
    ``forward_with_scores`` before issue 27 (transcribed): a ViT's
    final-norm tokens and patch grid read with forward hooks, cosine with
    the CLS output (GAP without a CLS token); a CNN's last map, cosine with
    its global average pool."""
    if not hasattr(backbone, 'patch_embed'):
        last = backbone(x)[-1]
        tokens = last.flatten(2).transpose(1, 2)
        score = patch_score(tokens, tokens.mean(dim=1))
        return score.reshape(last.shape[0], 1, *last.shape[-2:])
    grids, finals = [], []
    final = backbone.ln1 if backbone.final_norm else backbone.layers[-1]
    h1 = backbone.patch_embed.register_forward_hook(
        lambda _m, _i, out: grids.append(out))
    h2 = final.register_forward_hook(lambda _m, _i, out: finals.append(out))
    try:
        backbone(x)
    finally:
        h1.remove()
        h2.remove()
    tokens, hw = finals[-1], tuple(grids[-1][1])
    patches = tokens[:, backbone.num_extra_tokens:]
    query = tokens[:, 0] if backbone.num_extra_tokens else patches.mean(1)
    return patch_score(patches, query).reshape(tokens.shape[0], 1, *hw)


def _predictions_against_plain(model, plain):
    """``model`` (a PatchScoreNeck) with ``plain``'s weights on 64x64
    images: its predictions, the removed hook rule's scores and
    ``plain``'s logits."""
    model.load_state_dict(plain.state_dict(), strict=True)
    x = _images(64, 64)
    with torch.no_grad():
        return (model.predict(x), _old_hook_rule(plain.backbone,
                                                 x), plain(x, mode='tensor'))


def test_plain_vit_through_the_neck_equals_the_old_hook_scores():
    """A plain mmpretrain ViT: ``out_type='raw'`` + ``PatchScoreNeck(
    pooling='cls', mode='classification')`` gives the scores the removed
    hook path computed and the plain classifier's logits."""
    backbone = dict(
        type='VisionTransformer', arch=ARCH, img_size=64, patch_size=16)
    plain = _build(backbone)
    model = _build({
        **backbone, 'out_type': 'raw'
    },
                   neck=dict(
                       type='mmlocat.PatchScoreNeck',
                       in_channels=32,
                       mode='classification',
                       pooling='cls'))
    preds, want, logits = _predictions_against_plain(model, plain)
    for i, pred in enumerate(preds):
        assert torch.equal(pred.patch_score, want[i, 0])
        assert 'vote_map' not in pred
        assert torch.equal(pred.pred_score, logits[i].softmax(-1))


def test_neck_scores_take_priority():
    model = _build(
        dict(
            type='mmlocat.LaStViT',
            arch=ARCH,
            img_size=64,
            patch_size=16,
            out_type='featmap'),
        neck=dict(
            type='mmlocat.PatchScoreNeck',
            in_channels=32,
            mode='classification',
            pooling='gap'))
    x = _images()
    with torch.no_grad():
        preds = model.predict(x)
        feat = model.backbone(x)[-1]
    tokens = feat.flatten(2).transpose(1, 2)
    expected = patch_score(tokens, tokens.mean(1)).reshape(2, 4, 3)
    torch.testing.assert_close(preds[0].patch_score, expected[0])
    assert 'vote_map' not in preds[0]  # GAP has no votes


def test_cnn_through_the_neck_equals_the_old_gap_scores():
    """A CNN: ``PatchScoreNeck(pooling='gap', mode='classification')``
    gives the removed GAP-fallback scores and the logits of the same
    network with mmpretrain's ``GlobalAveragePooling`` neck."""
    backbone = dict(
        type='ResNet',
        depth=18,
        stem_channels=8,
        base_channels=8,
        out_indices=(3, ))
    head = dict(type='LinearClsHead', num_classes=3, in_channels=64)
    plain = _build(backbone, neck=dict(type='GlobalAveragePooling'), head=head)
    model = _build(
        backbone,
        neck=dict(
            type='mmlocat.PatchScoreNeck',
            in_channels=64,
            mode='classification',
            pooling='gap'),
        head=head)
    preds, want, logits = _predictions_against_plain(model, plain)
    for i, pred in enumerate(preds):
        torch.testing.assert_close(pred.patch_score, want[i, 0])
        torch.testing.assert_close(pred.pred_score, logits[i].softmax(-1))


def test_score_only_model_without_head():
    model = _build(
        dict(type='mmlocat.LaStViT', arch=ARCH, img_size=64, patch_size=16),
        head=None)
    sample = DataSample()
    sample.set_field(7, 'marker')
    with torch.no_grad():
        preds = model.predict(_images(), [sample, None])
    assert preds[0] is sample and preds[0].marker == 7
    assert preds[1].patch_score.shape == (4, 3)
    assert preds[0].patch_score.shape == (4, 3)
    with torch.no_grad():
        preds = model.predict(_images())
    assert len(preds) == 2 and 'patch_score' in preds[1]


def test_unsupported_backbone_raises():
    model = _build(
        dict(type='mmlocat.LaStViT', arch=ARCH, img_size=64, patch_size=16))
    # a backbone without forward_with_scores and no scoring neck
    model.backbone = torch.nn.Module()
    model.backbone.forward = lambda x: (x.mean(dim=(2, 3)), )
    with pytest.raises(
            TypeError,
            match='cannot compute patch scores.*'
            'mmlocat.PatchScoreNeck'):
        model.predict(_images())


def test_pib_baseline_is_the_host_vit_bit_for_bit():
    """The PiB configs' plain-ViT baseline, ``LaStViT(pooling='cls')``,
    predicts what mmpretrain's own ``VisionTransformer`` does with the same
    weights (patch scores and logits, bit for bit), so the LaSt vs plain A/B
    is the one ``pooling`` option."""
    torch.manual_seed(0)
    host = MODELS.build(
        dict(
            type='ImageClassifier',
            backbone=dict(
                type='VisionTransformer',
                arch=ARCH,
                img_size=64,
                patch_size=16),
            head=HEAD)).eval()
    ours = _build(
        dict(
            type='mmlocat.LaStViT',
            pooling='cls',
            arch=ARCH,
            img_size=64,
            patch_size=16))
    ours.load_state_dict(host.state_dict(), strict=True)
    x = _images()
    with torch.no_grad():
        want, got = host.predict(x), ours.predict(x)
        want_scores = _old_hook_rule(host.backbone, x)
    for i, (a, b) in enumerate(zip(want, got)):
        assert torch.equal(want_scores[i, 0], b.patch_score)
        assert torch.equal(a.pred_score, b.pred_score)
