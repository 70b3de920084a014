"""LocAtViT backbone: options, shapes, host integration and exact parity
with the public timm-based model
(``docs/method.md#gaug-gaussian-locality-bias``, ``docs/method.md#prr``)."""
import math

import pytest
import torch
import torch.nn.functional as F
from helpers.harness import run_tool
from helpers.tiny_archs import TINY_VIT
from torch import nn

import mmlocat  # noqa: F401
from mmlocat.models.backbones import LaStViT, LocAtViT
from mmlocat.models.layers import GaussianAugment

TINY = TINY_VIT


def tiny(**kwargs) -> LocAtViT:
    cfg = dict(arch=TINY, img_size=32, patch_size=16)
    cfg.update(kwargs)
    return LocAtViT(**cfg)


def num_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# ---------------------------------------------------------------- structure
@pytest.mark.parametrize('arch,extra', [('t', 2340), ('deit-small', 2340),
                                        ('b', 2340), ('l', 4680)])
def test_parameter_overhead(arch, extra):
    with torch.device('meta'):  # counting only: nothing is allocated
        full = num_params(LocAtViT(arch))
        no_gaug = num_params(LocAtViT(arch, gaug=False))
        no_prr = num_params(LocAtViT(arch, prr=False))
    assert full - no_gaug == extra  # 195 per block with 64-dim heads
    assert full == no_prr


def test_arch_aliases_and_custom_dict():
    with torch.device('meta'):
        for short, long, dims, heads, depth in [('t', 'tiny', 192, 3, 12),
                                                ('deit-s', 'deit-small', 384,
                                                 6, 12),
                                                ('b', 'base', 768, 12, 12),
                                                ('l', 'large', 1024, 16, 24)]:
            a, b = LocAtViT(short), LocAtViT(long)
            assert num_params(a) == num_params(b)
            assert (a.embed_dims, a.num_heads, a.num_layers) == (dims, heads,
                                                                 depth)
            ffn = a.layers[0].ffn.layers[0][0]
            assert ffn.out_features == 4 * dims
    model = tiny()
    assert len(model.layers) == 2 and model.embed_dims == 32
    with pytest.raises(AssertionError):
        LocAtViT(dict(embed_dims=32))


def test_ambiguous_small_alias_is_refused():
    """'s' meant DeiT-S in LocAtViT but is mmpretrain's 768-d, 8-layer
    ViT-S (and LaStViT's): refused, the message names both spellings."""
    for alias in ('s', 'small', 'S'):
        with pytest.raises(ValueError, match="arch='deit-small'") as err:
            LocAtViT(alias)
        assert ('embed_dims=768, num_layers=8, num_heads=8, '
                'feedforward_channels=2304') in str(err.value)
    with torch.device('meta'):
        deit_s = LocAtViT('deit-small')
        host_s = LaStViT('s')
        tiny_ = LocAtViT('t')
    assert (deit_s.embed_dims, deit_s.num_layers, deit_s.num_heads) == (384,
                                                                        12, 6)
    assert (host_s.embed_dims, host_s.num_layers) == (768, 8)
    assert (tiny_.embed_dims, tiny_.num_layers, tiny_.num_heads) == (192, 12,
                                                                     3)
    # The same alias builds the same network in both backbones.
    for alias in ('t', 'deit-t', 'deit-small', 'b', 'l'):
        with torch.device('meta'):
            a, b = LocAtViT(alias, gaug=False), LaStViT(alias)
        assert {
            n: p.shape
            for n, p in a.named_parameters()
        } == {
            n: p.shape
            for n, p in b.named_parameters()
        }, alias


def test_layer_names_and_gaug_constants():
    model = tiny(img_size=64, num_register_tokens=3)
    names = set(dict(model.named_parameters()))
    for name in ('layers.1.ln1.weight', 'layers.1.attn.qkv.bias',
                 'layers.1.attn.proj.weight', 'layers.1.ln2.bias',
                 'layers.1.ffn.layers.0.0.weight',
                 'layers.1.ffn.layers.1.bias',
                 'layers.1.attn.gaug.log_var.weight',
                 'layers.1.attn.gaug.log_alpha.bias', 'ln1.weight',
                 'reg_token', 'cls_token', 'pos_embed',
                 'patch_embed.projection.weight'):
        assert name in names, name
    gaug = model.layers[0].attn.gaug
    assert isinstance(gaug, GaussianAugment)
    assert gaug.grid_size == (4, 4) and gaug.cap == 16
    assert gaug.num_prefix_tokens == 4
    assert model.pos_embed.shape == (1, 4 + 16, 32)
    assert model.layers[0].ln1.eps == 1e-6
    assert isinstance(model.layers[0].ffn.layers[0][1], nn.GELU)
    assert model.layers[0].ffn.layers[0][1].approximate == 'none'
    assert tiny(gaug=False).layers[0].attn.gaug is None
    assert tiny(prr=False).pool.prr is None


# ------------------------------------------------------------------ outputs
@pytest.mark.parametrize('size', [(32, 32), (48, 64)])
@pytest.mark.parametrize('regs', [0, 2])
def test_out_types_shapes(size, regs):
    x = torch.rand(2, 3, *size)
    h, w = size[0] // 16, size[1] // 16
    expected = {
        'cls_token': (2, 32),
        'avg_featmap': (2, 32),
        'featmap': (2, 32, h, w),
        'raw': (2, 1 + regs + h * w, 32),
    }
    for out_type, shape in expected.items():
        outs = tiny(out_type=out_type, num_register_tokens=regs)(x)
        assert isinstance(outs, tuple) and len(outs) == 1
        assert outs[0].shape == shape, out_type
    gap = {
        'avg_featmap': (2, 32),
        'featmap': (2, 32, h, w),
        'raw': (2, regs + h * w, 32)
    }
    for out_type, shape in gap.items():
        model = tiny(
            pooling='gap', out_type=out_type, num_register_tokens=regs)
        assert model(x)[0].shape == shape, out_type
    assert tiny(pooling='gap').out_type == 'avg_featmap'


def test_out_indices_and_dense_outputs_skip_prr():
    torch.manual_seed(0)
    model = tiny(
        arch=dict(TINY, num_layers=3), out_type='featmap',
        out_indices=(0, 2)).eval()
    x = torch.rand(1, 3, 48, 64)
    outs = model(x)
    assert len(outs) == 2 and all(o.shape == (1, 32, 3, 4) for o in outs)
    no_prr = tiny(
        arch=dict(TINY, num_layers=3),
        out_type='featmap',
        out_indices=(0, 2),
        prr=False).eval()
    no_prr.load_state_dict(model.state_dict())
    for a, b in zip(outs, no_prr(x)):
        torch.testing.assert_close(a, b)  # PRR never touches featmaps
    # The last index is after the final norm (parent convention).
    raw = tiny(arch=dict(TINY, num_layers=3), out_type='raw').eval()
    raw.load_state_dict(model.state_dict())
    tokens = raw(x)[0]
    torch.testing.assert_close(
        outs[1], tokens[:, 1:].reshape(1, 3, 4, 32).permute(0, 3, 1, 2))
    torch.testing.assert_close(
        tokens.mean(-1), torch.zeros(1, 13), atol=1e-5, rtol=0)
    # Pooled outputs do see PRR.
    cls_prr = tiny(arch=dict(TINY, num_layers=3)).eval()
    cls_plain = tiny(arch=dict(TINY, num_layers=3), prr=False).eval()
    cls_prr.load_state_dict(model.state_dict())
    cls_plain.load_state_dict(model.state_dict())
    assert not torch.allclose(cls_prr(x)[0], cls_plain(x)[0])
    torch.testing.assert_close(cls_plain(x)[0], tokens[:, 0])


def test_no_grid_state_between_sizes():
    torch.manual_seed(0)
    model = tiny().eval()
    small = torch.rand(1, 3, 32, 32)
    before = model(small)[0]
    model(torch.rand(1, 3, 64, 80))
    torch.testing.assert_close(model(small)[0], before)


def test_input_not_multiple_of_patch_is_padded():
    torch.manual_seed(0)
    model = tiny(out_type='featmap').eval()
    x = torch.rand(1, 3, 40, 56)
    out = model(x)[0]
    assert out.shape == (1, 32, 3, 4)
    padded = F.pad(x, (0, 8, 0, 8))  # mmcv 'corner' padding: bottom/right
    torch.testing.assert_close(out, model(padded)[0])


def test_pooling_options_and_errors():
    model = tiny(pooling='gap')
    assert model.cls_token is None and model.final_norm is False
    assert model.pos_embed.shape == (1, 4, 32)
    with pytest.raises(ValueError, match='avg_featmap'):
        tiny(pooling='gap', out_type='cls_token')
    with pytest.raises(ValueError, match='pooling'):
        tiny(pooling='max')
    with pytest.raises(ValueError, match='out_type'):
        tiny(out_type='tokens')
    with pytest.raises(ValueError, match='num_register_tokens'):
        tiny(num_register_tokens=-1)
    nopos = tiny(use_pos_embed=False)
    assert nopos.pos_embed is None
    assert nopos(torch.rand(1, 3, 48, 32))[0].shape == (1, 32)


# ---------------------------------------------------------------- gradients
def test_last_gaug_gets_zero_grad_without_prr():
    for prr in (False, True):
        torch.manual_seed(0)
        model = tiny(img_size=64, prr=prr)
        model.init_weights()
        model(torch.rand(2, 3, 64, 64))[0].pow(2).sum().backward()
        first = model.layers[0].attn.gaug.log_var.weight.grad
        assert first is not None and first.abs().sum() > 0
        for p in model.layers[-1].attn.gaug.parameters():
            grad = p.grad if p.grad is not None else torch.zeros_like(p)
            if prr:
                assert grad.abs().sum() > 0
            else:
                assert torch.count_nonzero(grad) == 0


# ------------------------------------------------------- training utilities
def test_get_layer_depth():
    model = tiny(arch=dict(TINY, num_layers=4), num_register_tokens=1)
    total = 6
    cases = {
        'backbone.cls_token': 0,
        'backbone.reg_token': 0,
        'backbone.pos_embed': 0,
        'backbone.patch_embed.projection.weight': 0,
        'backbone.layers.0.ln1.weight': 1,
        'backbone.layers.2.attn.gaug.log_var.weight': 3,
        'backbone.layers.3.attn.gaug.log_alpha.bias': 4,
        'backbone.ln1.weight': 5,
        'head.layers.head.weight': 5,
    }
    for name, depth in cases.items():
        assert model.get_layer_depth(name, 'backbone.') == (depth, total)


def test_pos_embed_resize_keeps_registers():
    torch.manual_seed(0)
    src = tiny(num_register_tokens=2)
    src.init_weights()
    # A 2x2-grid checkpoint loaded at 4x5: prefix kept, grid resampled.
    big = tiny(img_size=(64, 80), num_register_tokens=2)
    big.load_state_dict(src.state_dict())
    old = src.pos_embed.detach()
    torch.testing.assert_close(big.pos_embed[:, :3], old[:, :3])
    grid = old[:, 3:].reshape(1, 2, 2, 32).permute(0, 3, 1, 2)
    want = F.interpolate(
        grid, size=(4, 5), mode='bicubic', align_corners=False,
        antialias=True).permute(0, 2, 3, 1).reshape(1, 20, 32)
    torch.testing.assert_close(big.pos_embed[:, 3:], want)
    # A checkpoint with a different prefix layout cannot be resized.
    with pytest.raises(ValueError, match='prefix'):
        tiny(
            img_size=64, num_register_tokens=1).load_state_dict(
                src.state_dict(), strict=False)


# ------------------------------------------------- parity with public model
def spec_eps(grid):
    eps = 0.1
    while 0.5 * (max(grid) - 1)**2 / eps**2 > 32500:
        eps *= 2
    return eps


def spec_bias(q, gaug, train_grid, hw, num_prefix):
    """S of ``docs/method.md#gaug-gaussian-locality-bias`` by broadcasting
    (independent of mmlocat)."""
    h0, w0 = train_grid
    h, w = hw
    c = max(h0, w0)**2
    qp = q[:, :, num_prefix:]
    var = c * torch.sigmoid(gaug.log_var(qp) - math.log(c - 1))
    if (h, w) != (h0, w0):
        var = var * (min(h, w) / min(h0, w0))
    alpha = F.softplus(gaug.log_alpha(qp))
    rows = torch.arange(h).repeat_interleave(w).float()
    cols = torch.arange(w).repeat(h).float()
    floor = max(-0.5 * (max(h0, w0) - 1)**2, -6550.)
    d_row = (-0.5 * (rows[:, None] - rows[None, :])**2).clamp(min=floor)
    d_col = (-0.5 * (cols[:, None] - cols[None, :])**2).clamp(min=floor)
    eps = spec_eps(train_grid)
    expo = d_row / (var[..., :1] + eps) + d_col / (var[..., 1:] + eps)
    return F.pad(alpha * torch.exp(expo), (num_prefix, 0, num_prefix, 0))


def spec_prr(x, num_heads):
    b, n, c = x.shape
    xh = x.reshape(b, n, num_heads, -1).transpose(1, 2)
    attn = (xh @ xh.transpose(-2, -1) / math.sqrt(xh.shape[-1])).softmax(-1)
    return (attn @ xh).transpose(1, 2).reshape(b, n, c)


def build_public_model(reg_tokens, pooling='cls', seed=0):
    """timm ViT + GAug blocks + PRR before the head, as the public code."""
    timm_vit = pytest.importorskip('timm.models.vision_transformer')

    class SpecGAug(nn.Module):

        def __init__(self, head_dim):
            super().__init__()
            self.log_var = nn.Linear(head_dim, 2)
            self.log_alpha = nn.Linear(head_dim, 1)

    class SpecAttention(timm_vit.Attention):

        def __init__(self, dim, num_heads, qkv_bias, num_prefix):
            super().__init__(dim, num_heads=num_heads, qkv_bias=qkv_bias)
            self.gaug = SpecGAug(self.head_dim)
            self.num_prefix = num_prefix
            self.hw = None

        def forward(self, x, attn_mask=None):
            b, n, c = x.shape
            qkv = self.qkv(x).reshape(b, n, 3, self.num_heads, self.head_dim)
            q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
            logits = q @ k.transpose(-2, -1) * self.head_dim**-0.5
            logits = logits + spec_bias(q, self.gaug,
                                        (14, 14), self.hw, self.num_prefix)
            x = (logits.softmax(-1) @ v).transpose(1, 2).reshape(b, n, c)
            return self.proj(x)

    num_prefix = reg_tokens + int(pooling == 'cls')

    def block_fn(**kwargs):
        block = timm_vit.Block(**kwargs)
        block.attn = SpecAttention(kwargs['dim'], kwargs['num_heads'],
                                   kwargs['qkv_bias'], num_prefix)
        return block

    model = timm_vit.VisionTransformer(
        img_size=224,
        patch_size=16,
        embed_dim=192,
        depth=3,
        num_heads=3,
        mlp_ratio=4.,
        qkv_bias=True,
        num_classes=10,
        reg_tokens=reg_tokens,
        class_token=pooling == 'cls',
        global_pool='token' if pooling == 'cls' else 'avg',
        dynamic_img_size=True,
        dynamic_img_pad=True,  # pads bottom/right like mmcv's PatchEmbed
        block_fn=block_fn)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            if 'norm' in name and name.endswith('weight'):
                p.copy_(1 + 0.1 * noise)
            elif 'gaug' in name:
                p.copy_(0.3 * noise)
            else:
                p.copy_(0.05 * noise)
    model.eval()

    def forward(x):
        """Public ``forward``: features -> PRR -> head; returns both."""
        for blk in model.blocks:
            blk.attn.hw = (-(-x.shape[2] // 16), -(-x.shape[3] // 16))
        feats = model.forward_features(x)
        return model.forward_head(spec_prr(feats, 3)), feats

    return model, forward


ACCEPTANCE_CFG = dict(
    type='mmpretrain.ImageClassifier',
    backbone=dict(
        type='mmlocat.LocAtViT',
        arch=dict(
            embed_dims=192,
            num_layers=3,
            num_heads=3,
            feedforward_channels=768),
        img_size=224,
        patch_size=16),
    head=dict(
        type='mmpretrain.VisionTransformerClsHead',
        num_classes=10,
        in_channels=192))


@pytest.mark.parametrize('reg_tokens,fmt', [(0, 'safetensors'), (4, 'pth')])
@pytest.mark.e2e
def test_parity_with_public_model_via_cli(tmp_path, repo_root, subprocess_env,
                                          reg_tokens, fmt):
    from mmpretrain.registry import MODELS
    timm_model, timm_forward = build_public_model(reg_tokens)
    src = str(tmp_path / f'public.{fmt}')
    state = timm_model.state_dict()
    assert any('attn.gaug.log_var' in k for k in state)
    if fmt == 'safetensors':
        from safetensors.torch import save_file
        save_file({k: v.contiguous() for k, v in state.items()}, src)
    else:
        torch.save({'model': state}, src)
    dst = str(tmp_path / 'converted.pth')
    proc = run_tool('tools/model_converters/locat2mmlocat.py', src, dst)
    assert proc.returncode == 0, proc.stderr
    assert 'GAug weights: yes' in proc.stdout
    state_dict = torch.load(dst, weights_only=True)['state_dict']

    cfg = dict(ACCEPTANCE_CFG)
    cfg['backbone'] = dict(cfg['backbone'], num_register_tokens=reg_tokens)
    model = MODELS.build(cfg).eval()
    model.load_state_dict(state_dict, strict=True)
    backbone_sd = {
        k[len('backbone.'):]: v
        for k, v in state_dict.items() if k.startswith('backbone.')
    }
    backbone_cfg = {k: v for k, v in cfg['backbone'].items() if k != 'type'}
    dense = LocAtViT(**backbone_cfg, out_type='featmap').eval()
    dense.load_state_dict(backbone_sd, strict=True)

    torch.manual_seed(1)
    sizes = [(2, 224, 224), (2, 320, 448)]
    if reg_tokens:  # 683 is not a multiple of 16: both pad bottom/right
        sizes.append((1, 512, 683))
    for batch, *size in sizes:
        x = torch.rand(batch, 3, *size) * 2 - 1
        with torch.no_grad():
            want, feats = timm_forward(x)
            got = model(x, mode='tensor')
            assert got.shape == want.shape == (batch, 10)
            assert (got - want).abs().max() <= 1e-4, size
            h, w = -(-size[0] // 16), -(-size[1] // 16)
            want_map = feats[:, 1 + reg_tokens:].reshape(batch, h, w, 192)
            got_map = dense(x)[0]
            assert got_map.shape == (batch, 192, h, w)
            assert (got_map - want_map.permute(0, 3, 1, 2)).abs().max() \
                <= 1e-4, size


def test_parity_with_public_model_gap_pooling():
    from mmpretrain.registry import MODELS

    from mmlocat.utils.converters import convert_timm_locat
    timm_model, timm_forward = build_public_model(2, pooling='gap', seed=3)
    state_dict = convert_timm_locat(timm_model.state_dict())
    assert 'backbone.ln2.weight' in state_dict
    assert 'backbone.ln1.weight' not in state_dict  # timm norm is Identity
    cfg = dict(ACCEPTANCE_CFG)
    cfg['backbone'] = dict(
        cfg['backbone'], num_register_tokens=2, pooling='gap')
    model = MODELS.build(cfg).eval()
    model.load_state_dict(state_dict, strict=True)
    x = torch.rand(1, 3, 256, 192) * 2 - 1
    with torch.no_grad():
        want = timm_forward(x)[0]
        assert (model(x, mode='tensor') - want).abs().max() <= 1e-4


def test_resample_matches_timm():
    timm_pos = pytest.importorskip('timm.layers')
    from mmlocat.models.backbones import resample_abs_pos_embed
    pos = torch.randn(1, 3 + 14 * 14, 8)
    for new in [(20, 28), (7, 9), (14, 20)]:
        torch.testing.assert_close(
            resample_abs_pos_embed(pos, (14, 14), new, 3),
            timm_pos.resample_abs_pos_embed(
                pos, new, old_size=(14, 14), num_prefix_tokens=3))
