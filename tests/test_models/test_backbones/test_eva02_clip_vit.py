"""EVA02CLIPViT against an independent tiny EVA02-CLIP image tower."""
import os.path as osp
from collections import OrderedDict

import pytest
import torch
from helpers.clipself_reference import EVAVisual, randomise_, rope_tables
from helpers.harness import run_tool
from torch import nn

import mmlocat  # noqa: F401  (registers the mmlocat scope)
from mmlocat.models import EVA02CLIPViT
from mmlocat.models.backbones.eva02_clip_layers import eva_rope_table
from mmlocat.models.layers import lazy_strike_pool
from mmlocat.utils.checkpoint_io import load_state_dict_reported
from mmlocat.utils.converters import convert_eva02_clip

WIDTH, LAYERS, HEADS, PATCH, IMG, OUT, PT = 64, 2, 2, 16, 64, 32, 16
HIDDEN = int(WIDTH * 2.6667)
ARCH = dict(
    embed_dims=WIDTH,
    num_layers=LAYERS,
    num_heads=HEADS,
    feedforward_channels=HIDDEN,
    output_dims=OUT)


# --- reference: EVA-CLIP's image tower as CLIPSelf's open_clip fork writes
# it (tests/helpers/clipself_reference.py: EVA key names, q/v biases, sub-LN,
# SwiGLU, 2-D RoPE registered in every attention, CLIPSelf's rescaling for
# other sizes). Independent of mmlocat's code.
class RefEVAVisual(EVAVisual):

    def __init__(self):
        super().__init__(WIDTH, LAYERS, HEADS, HIDDEN, OUT, PATCH, IMG)

    def tokens(self, x):
        x, _ = self.embed(x)
        for blk in self.blocks:
            x = blk(x)
        return self.norm(x)

    def forward(self, x, pooling='cls'):
        t = self.tokens(x)
        if pooling == 'cls':
            return self.head(t[:, 0])
        return self.head(lazy_strike_pool(t[:, 1:], topk=1).pooled)


@pytest.fixture(scope='module')
def reference():
    return randomise_(RefEVAVisual(), seed=5)


def eva(**kwargs):
    kwargs.setdefault('img_size', IMG)
    kwargs.setdefault('arch', ARCH)
    return EVA02CLIPViT(patch_size=PATCH, **kwargs).eval()


def full_eva_clip_state_dict(visual):
    """EVA-CLIP layout: image tower under ``visual.`` plus a text tower."""
    sd = OrderedDict(
        ('visual.' + k, v) for k, v in visual.state_dict().items())
    sd['text.transformer.resblocks.0.ln_1.weight'] = torch.ones(8)
    sd['text.token_embedding.weight'] = torch.zeros(10, 8)
    sd['logit_scale'] = torch.tensor(4.6)
    return sd


def loaded(reference, **kwargs):
    model = eva(**kwargs)
    load_state_dict_reported(model, convert_eva02_clip(reference.state_dict()))
    return model


def images(size, seed=4, batch=2):
    return torch.randn(
        batch, 3, *size, generator=torch.Generator().manual_seed(seed))


def test_rope_table_matches_eva():
    for grid in (4, 7):
        cos, sin = eva_rope_table((grid, grid), WIDTH // HEADS, PT)
        ref_cos, ref_sin = rope_tables(grid, WIDTH // HEADS, PT)
        torch.testing.assert_close(cos, ref_cos)
        torch.testing.assert_close(sin, ref_sin)
    # rows and columns follow their own axis on non-square grids
    cos, _ = eva_rope_table((2, 3), 8, PT)
    assert torch.equal(cos[0, :4], cos[2, :4])  # same row, first half
    assert not torch.equal(cos[0, 4:], cos[2, 4:])
    with pytest.raises(ValueError, match='divisible by 4'):
        eva_rope_table((2, 2), 6)


@pytest.mark.parametrize('size', [(IMG, IMG), (96, 96)])
@pytest.mark.parametrize('pooling', ['cls', 'lazy_strike'])
def test_parity_with_eva_reference(reference, pooling, size):
    model = loaded(reference, pooling=pooling)
    x = images(size)
    with torch.no_grad():
        ours = model(x)[0]
        ref = reference(x, pooling=pooling)
    assert ours.shape == (2, OUT)
    torch.testing.assert_close(ours, ref, atol=1e-4, rtol=0)


@pytest.mark.parametrize('size', [(IMG, IMG), (96, 96)])
def test_featmap_and_dense_map_match_reference(reference, size):
    model = loaded(reference, out_type='featmap', out_indices=(0, 1))
    x = images(size, seed=6)
    h, w = size[0] // PATCH, size[1] // PATCH
    with torch.no_grad():
        outs, dense = model.forward_dense(x)
        plain = model(x)
        tokens = reference.tokens(x)[:, 1:]
        ref_dense = reference.encode_dense(x)
    assert [o.shape for o in outs] == [(2, WIDTH, h, w)] * 2
    for a, b in zip(outs, plain):
        torch.testing.assert_close(a, b)
    torch.testing.assert_close(
        outs[1],
        tokens.transpose(1, 2).reshape(2, WIDTH, h, w),
        atol=1e-4,
        rtol=0)
    assert dense.shape == (2, OUT, h, w)
    torch.testing.assert_close(dense, ref_dense, atol=1e-4, rtol=0)
    torch.testing.assert_close(
        dense.norm(dim=1), torch.ones(2, h, w), atol=1e-5, rtol=0)


def test_non_square_input_runs(reference):
    model = loaded(reference, out_type='featmap', out_indices=(1, ))
    with torch.no_grad():
        outs, dense = model.forward_dense(images((48, 80), batch=1))
    assert outs[0].shape == (1, WIDTH, 3, 5) and dense.shape == (1, OUT, 3, 5)
    assert torch.isfinite(dense).all()


@pytest.mark.e2e
def test_cli_converts_full_eva_checkpoint(reference, tmp_path, repo_root,
                                          subprocess_env):
    src = osp.join(tmp_path, 'EVA02_CLIP_tiny.pt')
    dst = osp.join(tmp_path, 'eva_mmlocat.pth')
    torch.save(full_eva_clip_state_dict(reference), src)
    proc = run_tool('tools/model_converters/eva02_clip2mmlocat.py', src, dst)
    assert proc.returncode == 0, proc.stderr
    sd = torch.load(dst, map_location='cpu', weights_only=True)['state_dict']
    assert all(k.startswith('backbone.') for k in sd)
    assert not any('rope' in k or 'text' in k for k in sd)
    for pooling in ('cls', 'lazy_strike'):
        model = eva(
            pooling=pooling,
            init_cfg=dict(
                type='Pretrained', checkpoint=dst, prefix='backbone.'))
        model.init_weights()
        x = images((IMG, IMG), seed=7)
        with torch.no_grad():
            torch.testing.assert_close(
                model(x)[0], reference(x, pooling), atol=1e-4, rtol=0)


@pytest.mark.e2e
def test_cli_rejects_unknown_format(tmp_path, repo_root, subprocess_env):
    src = osp.join(tmp_path, 'other.pth')
    torch.save({'conv.weight': torch.zeros(2, 2)}, src)
    proc = run_tool('tools/model_converters/eva02_clip2mmlocat.py', src,
                    osp.join(tmp_path, 'out.pth'))
    assert proc.returncode != 0
    assert 'EVA02-CLIP image tower' in proc.stderr
    assert not osp.exists(osp.join(tmp_path, 'out.pth'))


def test_layout_and_named_archs():
    model = eva()
    assert model.patch_embed.projection.bias is not None
    assert isinstance(model.pre_norm, nn.Identity)  # EVA has no ln_pre
    assert model.ln1.eps == 1e-6
    attn = model.layers[0].attn
    assert attn.k_proj.bias is None and attn.q_proj.bias is not None
    assert model.layers[0].ffn.w12.weight.shape == (2 * HIDDEN, WIDTH)
    assert model.head.weight.shape == (OUT, WIDTH)
    assert model.get_layer_depth('head.weight') == (LAYERS + 1, LAYERS + 2)
    assert model.get_layer_depth('layers.0.attn.q_proj.weight')[0] == 1
    with torch.device('meta'):
        base = EVA02CLIPViT(arch='b')
        large = EVA02CLIPViT(arch='l')
    assert base.head.weight.shape == (512, 768) and len(base.layers) == 12
    assert base.patch_resolution == (14, 14)
    assert base.layers[0].ffn.w12.weight.shape == (2 * 2048, 768)
    assert large.head.weight.shape == (768, 1024) and len(large.layers) == 24
    assert large.patch_resolution == (24, 24)  # 336 / 14
    assert large.layers[0].ffn.w3.weight.shape == (1024, 2730)
    assert large.pos_embed.shape == (1, 577, 1024)
    partly = eva(frozen_stages=1)
    assert not any(p.requires_grad for p in partly.layers[0].parameters())
    assert all(p.requires_grad for p in partly.layers[1].parameters())
    with pytest.raises(ValueError, match='pre_norm'):
        eva(pre_norm=True)
    with pytest.raises(KeyError, match='arch'):
        EVA02CLIPViT(arch='huge')
    with pytest.raises(ValueError, match='divisible by 4'):
        eva(arch=dict(ARCH, num_heads=32))  # head_dims 2


def test_fvit_detector_with_eva02_backbone(tmp_path):
    """F-ViT trains (frozen tower, no grads) and fuses the dense CLIP map
    with an EVA02-CLIP backbone, unchanged."""
    from helpers.fvit import (EMBED, build_detector, det_batch, tiny_fvit_cfg,
                              write_embeddings)
    names = ['cat', 'dog', 'car']
    cfg = tiny_fvit_cfg(
        write_embeddings(tmp_path / 'emb.npy', names),
        names,
        base_class_names=['cat', 'car'])
    cfg['backbone'] = dict(
        type='mmlocat.EVA02CLIPViT',
        arch=dict(
            embed_dims=32,
            num_layers=4,
            num_heads=2,
            feedforward_channels=64,
            output_dims=EMBED),
        patch_size=16,
        img_size=64,
        out_type='featmap',
        out_indices=(0, 1, 2, 3),
        frozen=True)
    model = build_detector(cfg)
    assert isinstance(model.backbone, EVA02CLIPViT)
    model.train()
    assert not model.backbone.training
    data = det_batch(model)
    total, _ = model.parse_losses(
        model.loss(data['inputs'], data['data_samples']))
    total.backward()
    assert torch.isfinite(total)
    assert all(p.grad is None for p in model.backbone.parameters())
    model.eval()
    calls = []
    dense = model.backbone.forward_dense
    model.backbone.forward_dense = lambda x, **kw: calls.append(1) or dense(
        x, **kw)
    with torch.no_grad():
        res = model.predict(data['inputs'], data['data_samples'])
    assert calls == [1]
    assert len(res[0].pred_instances.scores) > 0
