"""LaStViT: parity with the public torchvision model, API for all hosts."""
import os.path as osp

import pytest
import torch
from helpers.harness import run_tool
from helpers.references import spec_lazy_strike
from helpers.tiny_archs import tiny_vit
from torchvision.models.vision_transformer import \
    VisionTransformer as TorchvisionViT

import mmlocat  # noqa: F401  (registers the mmlocat scope)
from mmlocat.models import LaStViT, lazy_strike_pool
from mmlocat.utils.checkpoint_io import load_state_dict_reported

TINY = tiny_vit(embed_dims=24, num_heads=3, feedforward_channels=48)


def randomise_(model, seed):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            if name.endswith('weight') and p.dim() == 1:  # norms
                p.copy_(1 + 0.2 * noise)
            else:
                p.copy_(0.05 * noise)
    return model.eval()


def torchvision_last_logits(tv, x):
    """The public model: torchvision ViT with LazyStrike as its pooling."""
    h = tv._process_input(x)
    h = torch.cat([tv.class_token.expand(h.shape[0], -1, -1), h], dim=1)
    h = tv.encoder(h)  # pos-embedding, blocks, encoder.ln
    return tv.heads(spec_lazy_strike(h[:, 1:]))


ACCEPTANCE_CFG = dict(
    type='mmpretrain.ImageClassifier',
    backbone=dict(
        type='mmlocat.LaStViT',
        arch=dict(
            embed_dims=768,
            num_layers=1,
            num_heads=12,
            feedforward_channels=256),
        img_size=96,
        patch_size=16),
    head=dict(
        type='mmpretrain.VisionTransformerClsHead',
        num_classes=10,
        in_channels=768))


def build_model(cfg):
    from mmengine.registry import MODELS
    return MODELS.build(cfg).eval()


@pytest.fixture(scope='module')
def torchvision_vit():
    torch.manual_seed(0)
    tv = TorchvisionViT(
        image_size=96,
        patch_size=16,
        num_layers=1,
        num_heads=12,
        hidden_dim=768,
        mlp_dim=256,
        num_classes=10)
    return randomise_(tv, seed=1)


@pytest.mark.parametrize('prefix', ['', 'model.'])
@pytest.mark.e2e
def test_torchvision_parity_through_cli(torchvision_vit, prefix, tmp_path,
                                        repo_root, subprocess_env):
    src = osp.join(tmp_path, 'last_vit_b16.pth')
    dst = osp.join(tmp_path, 'converted.pth')
    torch.save({
        prefix + k: v
        for k, v in torchvision_vit.state_dict().items()
    }, src)
    proc = run_tool('tools/model_converters/last_vit2mmlocat.py', src, dst)
    assert proc.returncode == 0, proc.stderr
    ckpt = torch.load(dst, map_location='cpu', weights_only=True)
    model = build_model(ACCEPTANCE_CFG)
    assert isinstance(model.backbone, LaStViT)
    model.load_state_dict(ckpt['state_dict'], strict=True)
    x = torch.randn(2, 3, 96, 96, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        ours = model(x, mode='tensor')
        ref = torchvision_last_logits(torchvision_vit, x)
        plain = torchvision_vit(x)
    assert ours.shape == (2, 10)
    torch.testing.assert_close(ours, ref, atol=1e-4, rtol=0)
    # LazyStrike really changed the output relative to the CLS baseline
    assert (ours - plain).abs().max() > 1e-2


def test_cls_pooling_is_the_plain_torchvision_vit(torchvision_vit):
    from mmlocat.utils.converters import convert_torchvision_vit
    cfg = dict(ACCEPTANCE_CFG)
    cfg['backbone'] = dict(ACCEPTANCE_CFG['backbone'], pooling='cls')
    model = build_model(cfg)
    sd = convert_torchvision_vit(torchvision_vit.state_dict())
    load_state_dict_reported(model, sd)
    x = torch.randn(1, 3, 96, 96)
    with torch.no_grad():
        torch.testing.assert_close(
            model(x, mode='tensor'), torchvision_vit(x), atol=1e-4, rtol=0)


def test_missing_or_extra_keys_refuse(torchvision_vit):
    from mmlocat.utils.converters import convert_torchvision_vit
    model = build_model(ACCEPTANCE_CFG)
    sd = convert_torchvision_vit(torchvision_vit.state_dict())
    missing = dict(sd)
    missing.pop('backbone.layers.0.attn.qkv.weight')
    with pytest.raises(RuntimeError, match='attn.qkv.weight'):
        load_state_dict_reported(model, missing)
    with pytest.raises(RuntimeError, match='Missing key'):
        model.load_state_dict(missing, strict=True)
    extra = dict(sd, **{'backbone.layers.1.ln1.weight': torch.ones(768)})
    with pytest.raises(RuntimeError, match='layers.1.ln1.weight'):
        load_state_dict_reported(model, extra)


def tiny(**kwargs):
    return LaStViT(arch=TINY, img_size=32, patch_size=8, **kwargs).eval()


@pytest.mark.parametrize('size', [32, 48])
@pytest.mark.parametrize('pooling', ['lazy_strike', 'cls'])
def test_out_types_at_two_sizes(size, pooling):
    x = torch.randn(2, 3, size, size)
    h = size // 8
    shapes = {
        'cls_token': (2, 24),
        'featmap': (2, 24, h, h),
        'raw': (2, 1 + h * h, 24),
        'avg_featmap': (2, 24),
    }
    for out_type, shape in shapes.items():
        model = tiny(out_type=out_type, pooling=pooling, out_indices=(0, -1))
        with torch.no_grad():
            outs = model(x)
        assert len(outs) == 2
        assert all(o.shape == shape for o in outs), out_type
        assert all(bool(torch.isfinite(o).all()) for o in outs)


def test_global_token_is_lazy_strike_of_final_patch_tokens():
    torch.manual_seed(0)
    model = tiny(out_type='raw')
    x = torch.randn(2, 3, 40, 40)
    with torch.no_grad():
        raw = model(x)[0]
        model.out_type = 'cls_token'
        pooled = model(x)[0]
    torch.testing.assert_close(pooled, lazy_strike_pool(raw[:, 1:]).pooled)
    torch.testing.assert_close(pooled, spec_lazy_strike(raw[:, 1:]))
    assert not torch.allclose(pooled, raw[:, 0])  # CLS output is unused
    cls_model = tiny(pooling='cls')
    cls_model.load_state_dict(model.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(cls_model(x)[0], raw[:, 0])


def test_cls_pooling_equals_mmpretrain_vit():
    from mmpretrain.models.backbones import VisionTransformer
    ref = VisionTransformer(arch=TINY, img_size=32, patch_size=8)
    ref.eval()  # mmpretrain's train() returns None
    model = tiny(pooling='cls')
    model.load_state_dict(ref.state_dict(), strict=True)
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(model(x)[0], ref(x)[0])


def test_topk_options_reach_the_pooling():
    x = torch.randn(2, 3, 48, 48)
    model = tiny(
        topk=None,
        topk_ratio=0.5,
        lazy_strike_window='centered',
        lazy_strike_score='paper')
    with torch.no_grad():
        out = model.forward_with_scores(x)
    # 36 patches, K = 18 per channel, 24 channels
    assert torch.equal(out['vote_map'].sum((1, 2, 3)),
                       torch.full((2, ), 18. * 24))


@pytest.mark.parametrize('pooling', ['lazy_strike', 'cls'])
def test_forward_with_scores(pooling):
    model = tiny(pooling=pooling)
    x = torch.randn(2, 3, 32, 48)
    with torch.no_grad():
        out = model.forward_with_scores(x)
        pooled = model(x)[0]
    assert out['global_token'].shape == (2, 24)
    torch.testing.assert_close(out['global_token'], pooled)
    assert out['patch_score'].shape == (2, 1, 4, 6)
    assert out['vote_map'].shape == (2, 1, 4, 6)
    assert out['featmap'].shape == (2, 24, 4, 6)
    assert bool((out['patch_score'].abs() <= 1 + 1e-5).all())
    assert torch.equal(out['vote_map'].sum((1, 2, 3)), torch.full((2, ), 24.))
    # patch score = cos(final patch token, global token)
    feat = out['featmap'].flatten(2).transpose(1, 2)
    cos = torch.nn.functional.cosine_similarity(
        feat, out['global_token'][:, None], dim=-1)
    torch.testing.assert_close(out['patch_score'].flatten(1), cos)


def test_layer_depth_and_bad_options():
    model = tiny()
    assert model.get_layer_depth('backbone.cls_token', 'backbone.') == (0, 4)
    assert model.get_layer_depth('backbone.layers.1.ln1.weight',
                                 'backbone.') == (2, 4)
    assert model.get_layer_depth('backbone.pre_norm.weight',
                                 'backbone.') == (0, 4)
    with pytest.raises(ValueError, match='pooling'):
        tiny(pooling='max')
    with pytest.raises(ValueError, match='topk'):
        tiny(topk=0)
    with pytest.raises(ValueError, match='window'):
        tiny(lazy_strike_window='hann')
