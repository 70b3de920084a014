"""PatchScoreClassifier attaches the right patch scores to predictions."""
import pytest
import torch
from mmpretrain.registry import MODELS
from mmpretrain.structures import DataSample

import mmlocat  # noqa: F401
from mmlocat.models.layers import patch_score

ARCH = dict(embed_dims=32, num_layers=1, num_heads=2, feedforward_channels=64)
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


def test_plain_vit_uses_cls_output_and_final_norm_tokens():
    backbone = dict(
        type='VisionTransformer', arch=ARCH, img_size=64, patch_size=16)
    model = _build(backbone)
    raw = MODELS.build({**backbone, 'out_type': 'raw'})
    raw.load_state_dict(model.backbone.state_dict())
    raw.eval()
    x = _images()
    with torch.no_grad():
        preds = model.predict(x)
        tokens = raw(x)[-1]  # (B, 1 + 12, C) after the final norm
        logits = model(x, mode='tensor')
    expected = patch_score(tokens[:, 1:], tokens[:, 0]).reshape(2, 4, 3)
    for i, pred in enumerate(preds):
        torch.testing.assert_close(pred.patch_score, expected[i])
        assert 'vote_map' not in pred
        torch.testing.assert_close(pred.pred_score, logits[i].softmax(-1))
    # the hooks are gone afterwards
    assert not model.backbone.ln1._forward_hooks
    assert not model.backbone.patch_embed._forward_hooks


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
            global_pool='gap'))
    x = _images()
    with torch.no_grad():
        preds = model.predict(x)
        feat = model.backbone(x)[-1]
    tokens = feat.flatten(2).transpose(1, 2)
    expected = patch_score(tokens, tokens.mean(1)).reshape(2, 4, 3)
    torch.testing.assert_close(preds[0].patch_score, expected[0])
    assert 'vote_map' not in preds[0]  # GAP has no votes


def test_cnn_backbone_gap_fallback():
    model = _build(
        dict(
            type='ResNet',
            depth=18,
            stem_channels=8,
            base_channels=8,
            out_indices=(3, )),
        neck=dict(type='GlobalAveragePooling'),
        head=dict(type='LinearClsHead', num_classes=3, in_channels=64))
    x = _images(64, 64)
    with torch.no_grad():
        preds = model.predict(x)
        feat = model.backbone(x)[-1]
    tokens = feat.flatten(2).transpose(1, 2)
    expected = patch_score(tokens, tokens.mean(1)).reshape(2, 2, 2)
    torch.testing.assert_close(preds[1].patch_score, expected[1])


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
    # a backbone with neither scores nor ViT attributes nor feature maps
    model.backbone = torch.nn.Module()
    model.backbone.forward = lambda x: (x.mean(dim=(2, 3)), )
    with pytest.raises(TypeError, match='cannot compute patch scores'):
        model.predict(_images())


def test_pib_baseline_is_the_host_vit_bit_for_bit():
    """The PiB configs' plain-ViT baseline, ``LaStViT(pooling='cls')``,
    predicts what mmpretrain's own ``VisionTransformer`` does with the same
    weights (patch scores and logits, bit for bit), so the LaSt vs plain A/B
    is the one ``pooling`` option."""
    host = _build(
        dict(type='VisionTransformer', arch=ARCH, img_size=64, patch_size=16))
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
    for a, b in zip(want, got):
        assert torch.equal(a.patch_score, b.patch_score)
        assert torch.equal(a.pred_score, b.pred_score)
