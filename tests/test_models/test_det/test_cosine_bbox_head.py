"""CosineSimBBoxHead: cosine logits, temperature, background, class
weights, CLIP score fusion, F-ViT's branch layout and embedding
validation."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers.fvit import EMBED, write_embeddings
from mmengine.config import ConfigDict

from mmlocat.models.det import CosineSimBBoxHead

NAMES = ['cat', 'dog', 'car', 'bus']
BASE = ['cat', 'car']


def _head(tmp_path, **kwargs):
    emb = write_embeddings(tmp_path / 'e.npy', NAMES)
    cfg = dict(
        text_embeddings=emb,
        class_names=NAMES,
        base_class_names=BASE,
        bg_class_weight=0.6,
        in_channels=8,
        conv_out_channels=8,
        fc_out_channels=EMBED,
        roi_feat_size=7)
    cfg.update(kwargs)
    return CosineSimBBoxHead(**ConfigDict(cfg)), emb


def test_logits_are_temperature_times_cosine(tmp_path):
    head, emb = _head(tmp_path)
    assert head.num_classes == 4 and isinstance(head.fc_cls, torch.nn.Identity)
    assert isinstance(head.temperature, torch.nn.Parameter)
    assert head.temperature.item() == 50.0
    raw = np.load(emb)
    text = raw[:4] / np.linalg.norm(raw[:4], axis=1, keepdims=True)
    bg = raw[4] / np.linalg.norm(raw[4])
    # F-ViT's default: the file's background row, fixed (not a parameter).
    assert not isinstance(head.bg_embedding, torch.nn.Parameter)
    assert 'bg_embedding' not in dict(head.named_parameters())
    np.testing.assert_allclose(head.bg_embedding.numpy(), bg, atol=1e-6)
    feats = torch.randn(3, EMBED)
    with torch.no_grad():
        head.temperature.fill_(7.0)
        logits = head.cosine_logits(feats)
    weights = np.concatenate([text, bg[None]])
    f = feats.numpy() / np.linalg.norm(feats.numpy(), axis=1, keepdims=True)
    np.testing.assert_allclose(logits.numpy(), 7.0 * f @ weights.T, atol=1e-5)
    # Cosine logits ignore the feature scale.
    torch.testing.assert_close(
        head.cosine_logits(5 * feats), head.cosine_logits(feats))


def test_fvit_branches_match_hand_computation(tmp_path):
    """F-ViT's FViTBBoxHead.forward: shared convs, shared FCs (ReLU), one
    FC per branch (ReLU), cosine of the ReLU'd cls FC output, fc_reg on the
    ReLU'd reg FC output."""
    head, _ = _head(tmp_path)
    head.init_weights()
    head.eval()
    assert len(head.cls_fcs) == 1 and len(head.reg_fcs) == 1
    assert head.cls_fcs[0].out_features == EMBED
    x = torch.randn(5, 8, 7, 7)
    with torch.no_grad():
        cls_score, bbox_pred = head(x)
        y = x
        for conv in head.shared_convs:
            y = conv(y)
        y = y.flatten(1)
        for fc in head.shared_fcs:
            y = F.relu(fc(y))
        x_cls = F.relu(head.cls_fcs[0](y))
        x_reg = F.relu(head.reg_fcs[0](y))
        weights = torch.cat([
            head.text_embeddings,
            F.normalize(head.bg_embedding, dim=0)[None]
        ])
        ref = F.normalize(x_cls, dim=-1) @ weights.t() * head.temperature
    torch.testing.assert_close(cls_score, ref)
    torch.testing.assert_close(bbox_pred, head.fc_reg(x_reg))


def test_linear_projection_option(tmp_path):
    head, _ = _head(
        tmp_path,
        cls_embed='linear',
        num_cls_fcs=0,
        num_reg_fcs=0,
        fc_out_channels=12)
    assert head.fc_cls.in_features == 12
    assert head.fc_cls.out_features == EMBED
    assert len(head.cls_fcs) == 0 and len(head.reg_fcs) == 0
    cls_score, bbox_pred = head(torch.randn(2, 8, 7, 7))
    assert cls_score.shape == (2, 5) and bbox_pred.shape == (2, 4)


def test_forward_shapes_and_gradients(tmp_path):
    head, _ = _head(tmp_path, background='learned')
    head.init_weights()
    cls_score, bbox_pred = head(torch.randn(6, 8, 7, 7))
    assert cls_score.shape == (6, 5) and bbox_pred.shape == (6, 4)
    cls_score.sum().backward()
    assert head.temperature.grad is not None
    assert head.bg_embedding.grad is not None
    assert 'text_embeddings' not in head.state_dict()  # from the file


def test_background_options(tmp_path):
    learned, emb = _head(tmp_path, background='learned')
    raw = np.load(emb)[4]
    np.testing.assert_allclose(
        F.normalize(learned.bg_embedding.detach(), dim=0).numpy(),
        raw / np.linalg.norm(raw),
        atol=1e-6)
    head, _ = _head(
        tmp_path,
        background='learned_random',
        learn_temperature=False,
        text_embeddings=write_embeddings(
            tmp_path / 'nobg.npy', NAMES, background=False))
    assert isinstance(head.bg_embedding, torch.nn.Parameter)
    assert not isinstance(head.temperature, torch.nn.Parameter)
    assert torch.isclose(head.bg_embedding.norm(), torch.tensor(1.0))


@pytest.mark.parametrize('background', ['text', 'learned'])
def test_missing_background_row_is_an_error(tmp_path, background):
    nobg = write_embeddings(tmp_path / 'nobg.npy', NAMES, background=False)
    with pytest.raises(ValueError, match=r'nobg\.npy has no .background. row'):
        _head(tmp_path, background=background, text_embeddings=nobg)


def test_cls_fc_width_must_match_the_embeddings(tmp_path):
    with pytest.raises(
            ValueError,
            match=r'e\.npy holds 16-d text embeddings but the classification '
            r'branch outputs 12 channels .*fc_out_channels=16'):
        _head(tmp_path, fc_out_channels=12)


def test_class_names_from_the_sidecar(tmp_path):
    head, _ = _head(tmp_path, class_names=None)
    assert head.class_names == NAMES and head.num_classes == 4


def test_class_weights_novel_zero_background(tmp_path):
    head, _ = _head(tmp_path)
    # cat, dog (novel), car, bus (novel), background
    assert head.loss_cls.class_weight.tolist() == pytest.approx(
        [1, 0, 1, 0, 0.6])
    assert head.is_base.tolist() == [True, False, True, False, True]
    cls_score = torch.randn(4, 5)
    labels = torch.tensor([0, 2, 4, 4])
    out = head.loss(cls_score, torch.zeros(4, 4), torch.zeros(4, 5), labels,
                    torch.ones(4), torch.zeros(4, 4), torch.zeros(4, 4))
    changed = cls_score.clone()
    changed[:, [1, 3]] += 50  # novel logits leave the softmax
    out2 = head.loss(changed, torch.zeros(4, 4), torch.zeros(4, 4), labels,
                     torch.ones(4), torch.zeros(4, 4), torch.zeros(4, 4))
    torch.testing.assert_close(out['loss_cls'], out2['loss_cls'])


def test_fusion_matches_hand_computation(tmp_path):
    head, _ = _head(tmp_path, alpha=0.1, beta=0.8, vlm_temperature=75.0)
    cls_score = torch.randn(3, 5)
    vlm = torch.randn(3, EMBED)
    fused = head.fuse_scores(cls_score, vlm)
    p = F.softmax(cls_score, dim=-1).numpy()
    w = F.normalize(head.classifier_weights(), dim=-1).detach().numpy()
    v = vlm.numpy() / np.linalg.norm(vlm.numpy(), axis=1, keepdims=True)
    z = 75.0 * v @ w.T
    q = np.exp(z - z.max(1, keepdims=True))
    q /= q.sum(1, keepdims=True)
    a = np.array([0.1, 0.8, 0.1, 0.8, 0.1])  # background counts as base
    np.testing.assert_allclose(
        fused.detach().numpy(), p**(1 - a) * q**a, rtol=1e-4, atol=1e-7)
    # Without CLIP features: the plain softmax.
    torch.testing.assert_close(
        head.fuse_scores(cls_score), F.softmax(cls_score, dim=-1))


@pytest.mark.parametrize('names, match', [
    (['dog', 'cat', 'car', 'bus'], 'different order'),
    (['cat', 'dog', 'car', 'van'], "missing \\['bus'\\]"),
    (['cat', 'dog', 'car'], 'lists 3 classes, the dataset 4'),
])
def test_mismatched_embeddings_refused(tmp_path, names, match):
    emb = write_embeddings(tmp_path / 'bad.npy', names)
    with pytest.raises(ValueError, match=match):
        CosineSimBBoxHead(
            text_embeddings=emb,
            class_names=NAMES,
            in_channels=8,
            conv_out_channels=8,
            fc_out_channels=EMBED)


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match='num_classes=3'):
        _head(tmp_path, num_classes=3)
    with pytest.raises(ValueError, match='not in class_names'):
        _head(tmp_path, base_class_names=['cat', 'truck'])
    with pytest.raises(ValueError, match='OVCrossEntropyLoss'):
        _head(tmp_path, loss_cls=dict(type='CrossEntropyLoss'))
    with pytest.raises(ValueError, match='beta'):
        _head(tmp_path, beta=1.5)
    with pytest.raises(ValueError, match='background must be one of'):
        _head(tmp_path, background='zeros')
    with pytest.raises(ValueError, match='cls_embed must be one of'):
        _head(tmp_path, cls_embed='mlp')
