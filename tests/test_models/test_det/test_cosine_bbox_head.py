"""CosineSimBBoxHead: cosine logits, temperature, background, class
weights, CLIP score fusion and embedding validation."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from _fvit_tiny import EMBED, write_embeddings
from mmengine.config import ConfigDict

from mmlocat.models.det import CosineSimBBoxHead

NAMES = ['cat', 'dog', 'car', 'bus']
BASE = ['cat', 'car']


def _head(tmp_path, background=True, **kwargs):
    emb = write_embeddings(tmp_path / 'e.npy', NAMES, background=background)
    cfg = dict(
        text_embeddings=emb,
        class_names=NAMES,
        base_class_names=BASE,
        bg_class_weight=0.6,
        in_channels=8,
        conv_out_channels=8,
        fc_out_channels=12,
        roi_feat_size=7)
    cfg.update(kwargs)
    return CosineSimBBoxHead(**ConfigDict(cfg)), emb


def test_logits_are_temperature_times_cosine(tmp_path):
    head, emb = _head(tmp_path)
    assert head.num_classes == 4 and head.fc_cls.out_features == EMBED
    assert isinstance(head.temperature, torch.nn.Parameter)
    assert head.temperature.item() == 50.0
    raw = np.load(emb)
    text = raw[:4] / np.linalg.norm(raw[:4], axis=1, keepdims=True)
    bg = raw[4] / np.linalg.norm(raw[4])
    # The file's background row initialises the learnable embedding.
    np.testing.assert_allclose(
        F.normalize(head.bg_embedding.detach(), dim=0).numpy(), bg, atol=1e-6)
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


def test_forward_shapes_and_gradients(tmp_path):
    head, _ = _head(tmp_path)
    head.init_weights()
    cls_score, bbox_pred = head(torch.randn(6, 8, 7, 7))
    assert cls_score.shape == (6, 5) and bbox_pred.shape == (6, 4)
    cls_score.sum().backward()
    assert head.temperature.grad is not None
    assert head.bg_embedding.grad is not None
    assert 'text_embeddings' not in head.state_dict()  # from the file


def test_fixed_temperature_and_random_background(tmp_path):
    head, _ = _head(tmp_path, background=False, learn_temperature=False)
    assert not isinstance(head.temperature, torch.nn.Parameter)
    assert torch.isclose(head.bg_embedding.norm(), torch.tensor(1.0))


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
            fc_out_channels=12)


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match='num_classes=3'):
        _head(tmp_path, num_classes=3)
    with pytest.raises(ValueError, match='not in class_names'):
        _head(tmp_path, base_class_names=['cat', 'truck'])
    with pytest.raises(ValueError, match='OVCrossEntropyLoss'):
        _head(tmp_path, loss_cls=dict(type='CrossEntropyLoss'))
    with pytest.raises(ValueError, match='beta'):
        _head(tmp_path, beta=1.5)
