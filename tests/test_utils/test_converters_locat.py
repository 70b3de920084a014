"""ViT / DeiT / LocAtViT checkpoint conversion into mmlocat's LocAtViT."""
import os.path as osp

import pytest
import torch
from helpers.harness import run_tool

import mmlocat  # noqa: F401
from mmlocat.utils.checkpoint_io import load_state_dict_reported
from mmlocat.utils.converters import (convert_timm_locat, convert_vit_to_locat,
                                      detect_vit_format)

TINY = dict(embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=128)


def classifier(**backbone):
    from mmpretrain.registry import MODELS
    return MODELS.build(
        dict(
            type='mmpretrain.ImageClassifier',
            backbone=dict(
                type='mmlocat.LocAtViT', arch=TINY, img_size=32, **backbone),
            head=dict(
                type='mmpretrain.VisionTransformerClsHead',
                num_classes=5,
                in_channels=32))).eval()


def timm_vit(**kwargs):
    timm_vit = pytest.importorskip('timm.models.vision_transformer')
    torch.manual_seed(0)
    model = timm_vit.VisionTransformer(
        img_size=32,
        patch_size=16,
        embed_dim=32,
        depth=2,
        num_heads=2,
        num_classes=5,
        **kwargs)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model.eval()


def gaug_keys(model):
    return sorted(k for k in model.state_dict() if 'attn.gaug.' in k)


def test_plain_timm_vit_reports_only_gaug_as_new(capsys):
    vit = timm_vit()
    sd = vit.state_dict()
    assert detect_vit_format(sd) == 'timm'
    converted = convert_vit_to_locat(sd)
    model = classifier()
    report = load_state_dict_reported(
        model, converted, allowed_missing=('attn.gaug.', ))
    assert sorted(report.missing) == gaug_keys(model)
    assert len(report.missing) == 2 * 4 and report.unexpected == []
    assert 'newly initialised (8)' in capsys.readouterr().out
    # Nothing else may be missing: dropping a block weight is refused.
    converted.pop('backbone.layers.0.attn.qkv.weight')
    with pytest.raises(RuntimeError, match='unexplained'):
        load_state_dict_reported(
            classifier(), converted, allowed_missing=('attn.gaug.', ))


def test_plain_vit_twin_matches_timm_vit():
    """gaug=False, prr=False is exactly a ViT (the baseline twin)."""
    vit = timm_vit(reg_tokens=2)
    model = classifier(gaug=False, prr=False, num_register_tokens=2)
    model.load_state_dict(convert_timm_locat(vit.state_dict()), strict=True)
    x = torch.rand(2, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(
            model(x, mode='tensor'), vit(x), rtol=1e-5, atol=1e-5)


def test_mmpretrain_vit_formats():
    from mmpretrain.registry import MODELS
    torch.manual_seed(0)
    vit = MODELS.build(
        dict(
            type='mmpretrain.ImageClassifier',
            backbone=dict(
                type='mmpretrain.VisionTransformer', arch=TINY, img_size=32),
            head=dict(
                type='mmpretrain.VisionTransformerClsHead',
                num_classes=5,
                in_channels=32))).eval()
    full = vit.state_dict()
    assert detect_vit_format(full) == 'mmpretrain'
    model = classifier(gaug=False, prr=False)
    model.load_state_dict(convert_vit_to_locat(full), strict=True)
    x = torch.rand(1, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(
            model(x, mode='tensor'), vit(x, mode='tensor'))
    bare = vit.backbone.state_dict()
    assert detect_vit_format(bare) == 'mmpretrain_backbone'
    converted = convert_vit_to_locat(bare)
    assert all(k.startswith('backbone.') for k in converted)
    report = load_state_dict_reported(
        classifier().backbone, {
            k[len('backbone.'):]: v
            for k, v in converted.items()
        },
        allowed_missing=('attn.gaug.', ))
    assert len(report.missing) == 8


def test_timm_keys_are_renamed():
    vit = timm_vit(reg_tokens=1)
    sd = {'module.' + k: v for k, v in vit.state_dict().items()}
    out = convert_timm_locat(sd)
    assert out['backbone.patch_embed.projection.weight'] is sd[
        'module.patch_embed.proj.weight']
    assert 'backbone.layers.1.ffn.layers.0.0.weight' in out
    assert 'backbone.layers.1.ffn.layers.1.bias' in out
    assert 'backbone.layers.0.ln1.weight' in out
    assert 'backbone.ln1.weight' in out and 'head.layers.head.bias' in out
    assert out['backbone.reg_token'].shape == (1, 1, 32)


@pytest.mark.e2e
def test_bad_checkpoints_raise(tmp_path, repo_root, subprocess_env):
    with pytest.raises(ValueError, match='unknown checkpoint format'):
        convert_vit_to_locat({'conv1.weight': torch.zeros(1)})
    with pytest.raises(ValueError, match='expected a timm'):
        convert_timm_locat({
            'backbone.patch_embed.projection.weight':
            torch.zeros(1),
            'backbone.layers.0.ln1.weight':
            torch.zeros(1)
        })
    with pytest.raises(ValueError, match='layer scale'):
        convert_timm_locat(timm_vit(init_values=1e-5).state_dict())
    sd = timm_vit().state_dict()
    sd['blocks.0.attn.qkv.weight'] = sd['blocks.0.attn.qkv.weight'].clone()
    sd['blocks.0.attn.qkv.weight'][0, 0] = float('nan')
    with pytest.raises(ValueError, match='NaN'):
        convert_timm_locat(sd)

    bad = str(tmp_path / 'resnet.pth')
    torch.save({'state_dict': {'conv1.weight': torch.zeros(2)}}, bad)
    proc = run_tool('tools/model_converters/locat2mmlocat.py', bad,
                    tmp_path / 'out.pth')
    assert proc.returncode != 0
    assert 'unknown checkpoint format' in proc.stderr
    assert not osp.exists(tmp_path / 'out.pth')
