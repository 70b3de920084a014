"""EVA02-CLIP (EVA repo and open_clip/timm layouts) -> EVA02CLIPViT keys."""
from collections import OrderedDict

import pytest
import torch

from mmlocat.models import EVA02CLIPViT
from mmlocat.models.backbones.eva02_clip_layers import eva_rope_table
from mmlocat.utils.checkpoint_io import load_state_dict_reported
from mmlocat.utils.converters import convert_eva02_clip

D, HID, OUT, GRID = 8, 12, 4, 2


def eva_visual(layers=2, prefix='visual.', rope_pt=16):
    """A tiny EVA-repo image tower state dict (random values)."""
    sd = {
        'cls_token': torch.randn(1, 1, D),
        'pos_embed': torch.randn(1, GRID * GRID + 1, D),
        'patch_embed.proj.weight': torch.randn(D, 3, 4, 4),
        'patch_embed.proj.bias': torch.randn(D),
        'norm.weight': torch.randn(D),
        'norm.bias': torch.randn(D),
        'head.weight': torch.randn(OUT, D),
        'head.bias': torch.randn(OUT),
    }
    cos, sin = eva_rope_table((GRID, GRID), D, rope_pt)
    sd['rope.freqs_cos'], sd['rope.freqs_sin'] = cos, sin
    for i in range(layers):
        b = f'blocks.{i}.'
        for name in ('norm1', 'norm2', 'attn.inner_attn_ln'):
            sd[b + name + '.weight'] = torch.randn(D)
            sd[b + name + '.bias'] = torch.randn(D)
        for name in ('q_proj', 'k_proj', 'v_proj', 'proj'):
            sd[b + f'attn.{name}.weight'] = torch.randn(D, D)
        sd[b + 'attn.q_bias'] = torch.randn(D)
        sd[b + 'attn.v_bias'] = torch.randn(D)
        sd[b + 'attn.proj.bias'] = torch.randn(D)
        for name in ('w1', 'w2'):
            sd[b + f'mlp.{name}.weight'] = torch.randn(HID, D)
            sd[b + f'mlp.{name}.bias'] = torch.randn(HID)
        sd[b + 'mlp.ffn_ln.weight'] = torch.randn(HID)
        sd[b + 'mlp.ffn_ln.bias'] = torch.randn(HID)
        sd[b + 'mlp.w3.weight'] = torch.randn(D, HID)
        sd[b + 'mlp.w3.bias'] = torch.randn(D)
    return OrderedDict((prefix + k, v) for k, v in sd.items())


def test_mapping_and_swiglu_stacking():
    sd = eva_visual()
    out = convert_eva02_clip(sd)
    # 2 rope buffers dropped; w1 + w2 (weight, bias) -> w12 per layer
    assert len(out) == len(sd) - 2 - 2 * 2
    v, b = 'visual.', 'visual.blocks.1.'
    assert torch.equal(out['patch_embed.projection.weight'],
                       sd[v + 'patch_embed.proj.weight'])
    assert torch.equal(out['ln1.bias'], sd[v + 'norm.bias'])
    assert torch.equal(out['head.weight'], sd[v + 'head.weight'])
    assert torch.equal(out['layers.1.attn.q_proj.bias'], sd[b + 'attn.q_bias'])
    assert torch.equal(out['layers.1.attn.v_proj.bias'], sd[b + 'attn.v_bias'])
    assert 'layers.1.attn.k_proj.bias' not in out
    assert torch.equal(out['layers.1.attn.sub_norm.weight'],
                       sd[b + 'attn.inner_attn_ln.weight'])
    assert torch.equal(out['layers.1.ln2.weight'], sd[b + 'norm2.weight'])
    # gate (w1) first: mmpretrain's SwiGLUFFN applies SiLU to the first half
    assert torch.equal(
        out['layers.1.ffn.w12.weight'],
        torch.cat((sd[b + 'mlp.w1.weight'], sd[b + 'mlp.w2.weight'])))
    assert torch.equal(out['layers.1.ffn.w12.bias'][:HID],
                       sd[b + 'mlp.w1.bias'])
    assert torch.equal(out['layers.1.ffn.norm.bias'],
                       sd[b + 'mlp.ffn_ln.bias'])
    assert torch.equal(out['layers.1.ffn.w3.weight'], sd[b + 'mlp.w3.weight'])


def test_text_tower_dropped_bare_and_wrapped_accepted():
    sd = eva_visual()
    full = dict(sd)
    full['text.transformer.resblocks.0.ln_1.weight'] = torch.zeros(3)
    full['logit_scale'] = torch.tensor(1.)
    keys = set(convert_eva02_clip(sd))
    assert set(convert_eva02_clip(full)) == keys
    assert set(convert_eva02_clip(eva_visual(prefix=''))) == keys
    wrapped = {'module.' + k: v for k, v in full.items()}
    assert set(convert_eva02_clip(wrapped)) == keys
    no_rope = {k: v for k, v in sd.items() if 'rope' not in k}
    assert set(convert_eva02_clip(no_rope)) == keys


def test_converted_keys_load_strictly_into_the_model():
    model = EVA02CLIPViT(
        arch=dict(
            embed_dims=D,
            num_layers=2,
            num_heads=2,
            feedforward_channels=HID,
            output_dims=OUT),
        img_size=8,
        patch_size=4)
    report = load_state_dict_reported(model, convert_eva02_clip(eva_visual()))
    assert not report.missing and not report.unexpected


def test_rope_copies_cached_grids_and_counter_are_checked_and_dropped():
    """The real layouts: EVA's RoPE module is a submodule of every attention
    (``blocks.i.attn.rope.*`` copies); CLIPSelf's EVA code also stores the
    tables of other grids it met (``freqs_cos_N``) and their counter."""
    sd = eva_visual()
    keys = set(convert_eva02_clip(sd))
    cached = eva_rope_table((5, 5), D, 16)
    for prefix in ['visual.'] + [f'visual.blocks.{i}.attn.' for i in (0, 1)]:
        sd[prefix + 'rope.freqs_cos'] = sd['visual.rope.freqs_cos']
        sd[prefix + 'rope.freqs_sin'] = sd['visual.rope.freqs_sin']
        sd[prefix + 'rope.freqs_cos_25'], sd[prefix +
                                             'rope.freqs_sin_25'] = cached
        sd[prefix + 'rope.flag'] = torch.tensor(1)
    assert set(convert_eva02_clip(sd)) == keys
    bad = dict(sd)
    bad['visual.blocks.1.attn.rope.freqs_cos_25'] = eva_rope_table((5, 5), D,
                                                                   8)[0]
    with pytest.raises(ValueError, match='blocks.1.attn.rope.freqs_cos_25'):
        convert_eva02_clip(bad)
    del bad['visual.blocks.1.attn.rope.freqs_cos_25']
    with pytest.raises(
            ValueError, match='sin_25 has no blocks.1.attn.rope.freqs_cos_25'):
        convert_eva02_clip(bad)


def test_rope_settings_are_checked():
    with pytest.raises(ValueError, match='pt_seq_len ~8'):
        convert_eva02_clip(eva_visual(rope_pt=8))
    out = convert_eva02_clip(eva_visual(rope_pt=8), rope_pt_seq_len=8)
    assert not any('rope' in k for k in out)


def test_other_layouts_and_unknown_keys_raise():
    with pytest.raises(ValueError, match='EVA02-CLIP image tower'):
        convert_eva02_clip({'conv.weight': torch.zeros(1)})
    with pytest.raises(ValueError, match='OpenAI-layout'):
        convert_eva02_clip({
            'visual.conv1.weight': torch.zeros(1),
            'visual.class_embedding': torch.zeros(1)
        })
    sd = eva_visual()
    sd['visual.blocks.0.attn.qkv.weight'] = torch.zeros(3 * D, D)
    with pytest.raises(ValueError, match='qkv'):
        convert_eva02_clip(sd)
    sd = eva_visual()
    sd['visual.blocks.0.gamma_1'] = torch.ones(D)  # layer scale: unknown
    with pytest.raises(ValueError, match='gamma_1'):
        convert_eva02_clip(sd)
    sd = eva_visual()
    del sd['visual.blocks.1.mlp.w2.bias']
    with pytest.raises(ValueError, match='only one of'):
        convert_eva02_clip(sd)
    trunk = {
        'visual.trunk.' + k[len('visual.'):]: v
        for k, v in eva_visual().items()
    }
    trunk['visual.head.proj.weight'] = torch.zeros(OUT, D)
    with pytest.raises(ValueError, match='outside the trunk'):
        convert_eva02_clip(trunk)


@pytest.mark.parametrize('pooling', ['cls', 'lazy_strike'])
def test_open_clip_timm_tower_parity(pooling):
    """open_clip's ``EVA02-B-16`` tower is timm's ``Eva`` under
    ``visual.trunk.``; a tiny one must give the same embedding."""
    eva_mod = pytest.importorskip('timm.models.eva')
    from mmlocat.models.layers import lazy_strike_pool
    torch.manual_seed(0)
    width, out_dims = 64, 32
    timm_model = eva_mod.Eva(
        img_size=64,
        patch_size=16,
        num_classes=out_dims,
        global_pool='token',
        embed_dim=width,
        depth=2,
        num_heads=2,
        qkv_fused=False,
        mlp_ratio=4 * 2 / 3,
        swiglu_mlp=True,
        scale_mlp=True,
        scale_attn_inner=True,
        use_rot_pos_emb=True,
        ref_feat_shape=(16, 16)).eval()
    with torch.no_grad():
        for p in timm_model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    sd = {'visual.trunk.' + k: v for k, v in timm_model.state_dict().items()}
    sd['text.positional_embedding'] = torch.zeros(3, 4)
    model = EVA02CLIPViT(
        arch=dict(
            embed_dims=width,
            num_layers=2,
            num_heads=2,
            feedforward_channels=int(width * 4 * 2 / 3),
            output_dims=out_dims),
        img_size=64,
        patch_size=16,
        pooling=pooling).eval()
    load_state_dict_reported(model, convert_eva02_clip(sd))
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        ours = model(x)[0]
        if pooling == 'cls':
            ref = timm_model(x)
        else:
            tokens = timm_model.forward_features(x)
            ref = timm_model.head(
                lazy_strike_pool(tokens[:, 1:], topk=1).pooled)
    torch.testing.assert_close(ours, ref, atol=1e-4, rtol=0)
