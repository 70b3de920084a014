"""The one non-finite policy (``finite_checks_on``: the mode passed
explicitly) and LazyStrike / the patch score under it: no host sync in a
training forward (checked twice: no scalar read-back op is dispatched, and
the whole training step runs on the data-less 'meta' device, where any read
of a value -- ``item``, ``bool``, ``tolist``, ``numpy`` -- raises), and in
inference one check with an error that says where the value came from."""
import pytest
import torch
from helpers.host_sync import HostSyncCounter as SyncCounter
from helpers.tiny_archs import TINY_VIT

from mmlocat.models.backbones import LocAtViT
from mmlocat.models.layers import lazy_strike_pool, patch_score
from mmlocat.models.layers.finite import finite_checks_on, refuse_nonfinite


def lazy_and_score(tokens, **kwargs):
    out = lazy_strike_pool(tokens, topk=2, **kwargs)
    score = patch_score(tokens, out.pooled, **kwargs)
    return out.pooled.float().sum() + score.sum()


def test_counter_sees_host_syncs():
    """The detector works: the eval-mode check is one sync, `bool()` one."""
    x = torch.randn(2, 5, 6)
    with SyncCounter() as counter:
        bool(x.isnan().any())
    assert counter.syncs == ['aten._local_scalar_dense.default']
    with pytest.raises(NotImplementedError, match='meta'):
        with torch.no_grad():
            lazy_strike_pool(x.to('meta'), check_finite=True)  # it reads


def test_training_forward_has_no_host_sync():
    tokens = torch.randn(2, 7, 6, requires_grad=True)
    with SyncCounter() as counter:
        lazy_and_score(tokens).backward()
    assert counter.syncs == []
    assert tokens.grad is not None and tokens.grad.abs().sum() > 0
    meta = torch.randn(2, 7, 6, device='meta', requires_grad=True)
    lazy_and_score(meta).backward()  # would raise on any read of a value
    assert meta.grad.shape == meta.shape


def test_locatvit_train_step_has_no_host_sync():
    """The GAug chunked kernel's forward and backward included."""
    model = LocAtViT(TINY_VIT, img_size=32, out_type='cls_token').train()
    x = torch.randn(2, 3, 48, 32)
    with SyncCounter() as counter:
        model(x)[0].pow(2).sum().backward()
    assert counter.syncs == []


def test_training_lets_non_finite_values_through():
    """Left to the loss (the AMP loss scaler skips such a step)."""
    tokens = torch.randn(2, 7, 6, requires_grad=True)
    bad = tokens.detach().clone()
    bad[0, 3, 1] = float('nan')
    bad[1, 2, 4] = float('inf')
    bad.requires_grad_()
    loss = lazy_and_score(bad)
    assert not torch.isfinite(loss)
    loss.backward()  # no error either


@pytest.mark.parametrize('value', [float('nan'), float('inf')])
def test_inference_names_non_finite_input_tokens(value):
    bad = torch.randn(2, 7, 6)
    bad[1, 2, 4] = value
    inference = finite_checks_on(None, training=False)
    with torch.no_grad():
        with pytest.raises(
                ValueError,
                match=r'LazyStrike got NaN or inf in its inputs '
                r'\(tokens 1 of 84, pooled 1 of 12 values '
                r'non-finite\): they were already non-finite'):
            lazy_strike_pool(bad, check_finite=inference)
        with pytest.raises(
                ValueError,
                match=r'patch_score got NaN or inf in its inputs '
                r'\(tokens 1 of 84, score 1 of 14 values'):
            patch_score(bad, torch.randn(2, 6), check_finite=inference)
        with pytest.raises(
                ValueError, match=r'global_token 1 of 12, score 7 of 14'):
            patch_score(torch.randn(2, 7, 6), bad[:, 2], check_finite=True)
    # The pure functions follow the caller's bool, not autograd: on with
    # autograd on, off (the default) with autograd off.
    with pytest.raises(ValueError, match='already non-finite'):
        lazy_strike_pool(bad, check_finite=True)
    with torch.no_grad():
        patch_score(bad, torch.randn(2, 6), check_finite=False)
        patch_score(bad, torch.randn(2, 6))


def test_non_finite_arising_inside_the_layer():
    """Finite inputs, non-finite output: the message says it arose inside."""
    tokens = torch.ones(2, 3)
    out = torch.tensor([1., float('nan')])
    with pytest.raises(
            ValueError,
            match=r'layer: its inputs \(tokens\) were finite, '
            r'but NaN or inf arose inside layer \(score 1 of 2'):
        refuse_nonfinite('layer', dict(tokens=tokens), dict(score=out))
    refuse_nonfinite('layer', dict(tokens=tokens), dict(score=out[:1]))


def test_finite_checks_on():
    """One rule: the caller's bool, else inference checks and training
    does not; never while tracing."""
    assert not finite_checks_on(None, training=True)
    assert finite_checks_on(None, training=False)
    assert not finite_checks_on(False, training=False)
    assert finite_checks_on(True, training=True)
    with torch.no_grad():  # autograd does not enter the decision
        assert not finite_checks_on(None, training=True)
    traced = torch.jit.trace(
        lambda x: x + int(finite_checks_on(True, training=False)),
        torch.zeros(1),
        check_trace=False)  # the eager call differs: that is the point
    assert traced(torch.zeros(1)).item() == 0
