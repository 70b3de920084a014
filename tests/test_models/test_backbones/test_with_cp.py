"""``with_cp``: activation checkpointing of every block in the one token
loop (``TokenLoopViT.run_block``) of LocAtViT, LaStViT, CLIPViT and
EVA02CLIPViT.

The same weights with and without it give the same outputs and the same
gradients (dropout and stochastic depth on: the recomputation must draw the
same masks), and the checkpointing really happens: each block is called
a second time during the backward (counted by a forward pre-hook: torch's
non-reentrant checkpoint may stop a recomputation before the block
returns, once the tensors the backward needs exist).
"""
import copy

import pytest
import torch
from helpers.tiny_archs import tiny_vit

import mmlocat  # noqa: F401  (registers the mmlocat scope)
from mmlocat.registry import MODELS

ARCH = tiny_vit(num_layers=3)
BACKBONES = {
    'LocAtViT':
    dict(type='mmlocat.LocAtViT', arch=ARCH, img_size=32, patch_size=8),
    'LaStViT':
    dict(
        type='mmlocat.LaStViT',
        arch=ARCH,
        img_size=32,
        patch_size=8,
        topk_ratio=0.5,
        topk=None,
        out_type='cls_token'),
    'CLIPViT':
    dict(
        type='mmlocat.CLIPViT',
        arch=dict(ARCH, output_dims=16),
        img_size=32,
        patch_size=8,
        act='gelu',
        out_type='cls_token'),
    'EVA02CLIPViT':
    dict(
        type='mmlocat.EVA02CLIPViT',
        arch=dict(ARCH, feedforward_channels=48, output_dims=16),
        img_size=32,
        patch_size=8,
        out_type='featmap',
        out_indices=(1, 2)),
}


def _pair(cfg):
    torch.manual_seed(0)
    # stochastic depth and dropout on: the recomputation must replay them
    cfg = dict(cfg, drop_path_rate=0.2, drop_rate=0.1)
    plain = MODELS.build(cfg)
    plain.init_weights()
    ckpt = MODELS.build(dict(cfg, with_cp=True))
    ckpt.load_state_dict(copy.deepcopy(plain.state_dict()))
    return plain.train(), ckpt.train()


def _step(model, images, seed):
    model.zero_grad()
    torch.manual_seed(seed)
    outs = model(images)
    loss = sum((o.float()**2).mean() for o in outs)
    loss.backward()
    grads = {
        n: p.grad.clone()
        for n, p in model.named_parameters() if p.grad is not None
    }
    return [o.detach() for o in outs], grads


@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_same_outputs_and_gradients(name):
    plain, ckpt = _pair(BACKBONES[name])
    assert ckpt.with_cp and not plain.with_cp
    images = torch.randn(2, 3, 32, 40)  # a non-square grid
    out_plain, grad_plain = _step(plain, images, seed=3)
    out_ckpt, grad_ckpt = _step(ckpt, images, seed=3)
    for a, b in zip(out_plain, out_ckpt):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert grad_plain.keys() == grad_ckpt.keys() and len(grad_plain) > 5
    for key, value in grad_plain.items():
        torch.testing.assert_close(
            grad_ckpt[key], value, rtol=1e-6, atol=1e-7, msg=key)


@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_blocks_are_recomputed_in_the_backward(name):
    _, ckpt = _pair(BACKBONES[name])
    calls = []
    for block in ckpt.layers:
        block.register_forward_pre_hook(lambda *_: calls.append(1))
    outs = ckpt(torch.randn(1, 3, 32, 32))
    forward_calls = len(calls)
    assert forward_calls == len(ckpt.layers)
    sum(o.sum() for o in outs).backward()
    assert len(calls) == 2 * forward_calls  # each block ran again
    # no recording, nothing to recompute: plain calls
    calls.clear()
    with torch.no_grad():
        ckpt(torch.randn(1, 3, 32, 32))
    assert len(calls) == len(ckpt.layers)


def test_default_is_off():
    for cfg in BACKBONES.values():
        assert MODELS.build(cfg).with_cp is False
