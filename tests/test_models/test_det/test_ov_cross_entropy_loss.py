"""OVCrossEntropyLoss: zero-weight classes leave the softmax."""
import pytest
import torch
import torch.nn.functional as F

from mmlocat.models.det import OVCrossEntropyLoss


def test_matches_hand_computation():
    torch.manual_seed(0)
    logits = torch.randn(5, 4)  # classes 0, 1 (novel), 2, background 3
    labels = torch.tensor([0, 2, 3, 3, 0])
    weight = [1.0, 0.0, 1.0, 0.6]
    loss = OVCrossEntropyLoss(class_weight=weight)(
        logits, labels, avg_factor=5.0)
    kept = logits[:, [0, 2, 3]]
    target = torch.tensor([0, 1, 2, 2, 0])
    w = torch.tensor([1.0, 1.0, 0.6, 0.6, 1.0])
    ref = (F.cross_entropy(kept, target, reduction='none') * w).sum() / 5
    torch.testing.assert_close(loss, ref)


def test_novel_logits_do_not_matter_and_get_no_grad():
    torch.manual_seed(1)
    logits = torch.randn(6, 4, requires_grad=True)
    labels = torch.tensor([0, 2, 3, 0, 2, 3])
    loss_fn = OVCrossEntropyLoss(class_weight=[1, 0, 1, 0.6])
    loss = loss_fn(logits, labels)
    loss.backward()
    assert torch.all(logits.grad[:, 1] == 0)
    assert torch.all(logits.grad[:, 0] != 0)
    changed = logits.detach().clone()
    changed[:, 1] += 100.0
    torch.testing.assert_close(loss_fn(changed, labels), loss.detach())
    # Plain mmdet-style weighting would have been hurt by the novel logit.
    plain = F.cross_entropy(changed, labels)
    assert plain > loss.detach() + 10


def test_zero_weight_target_contributes_nothing():
    logits = torch.randn(3, 3)
    loss = OVCrossEntropyLoss(class_weight=[1, 0, 1])(
        logits, torch.tensor([1, 1, 1]), reduction_override='none')
    assert torch.isfinite(loss).all() and torch.all(loss == 0)


def test_bad_class_weight():
    with pytest.raises(ValueError, match='not all zero'):
        OVCrossEntropyLoss(class_weight=[0, 0])
    with pytest.raises(ValueError, match='entries for'):
        OVCrossEntropyLoss(class_weight=[1, 1])(torch.randn(2, 3),
                                                torch.tensor([0, 1]))
