"""torchvision ViT -> mmpretrain keys (mmlocat.utils.converters.last_vit)."""
import os.path as osp

import pytest
import torch
from helpers.harness import run_tool
from torchvision.models.vision_transformer import \
    VisionTransformer as TorchvisionViT

from mmlocat.utils.converters import convert_torchvision_vit


@pytest.fixture(scope='module')
def tv_state_dict():
    return TorchvisionViT(
        image_size=32,
        patch_size=16,
        num_layers=2,
        num_heads=2,
        hidden_dim=8,
        mlp_dim=16,
        num_classes=3).state_dict()


def test_key_mapping(tv_state_dict):
    out = convert_torchvision_vit(tv_state_dict)
    assert len(out) == len(tv_state_dict)
    expected = {
        'class_token': 'backbone.cls_token',
        'conv_proj.weight': 'backbone.patch_embed.projection.weight',
        'conv_proj.bias': 'backbone.patch_embed.projection.bias',
        'encoder.pos_embedding': 'backbone.pos_embed',
        'encoder.layers.encoder_layer_1.ln_1.weight':
        'backbone.layers.1.ln1.weight',
        'encoder.layers.encoder_layer_0.self_attention.in_proj_weight':
        'backbone.layers.0.attn.qkv.weight',
        'encoder.layers.encoder_layer_0.self_attention.in_proj_bias':
        'backbone.layers.0.attn.qkv.bias',
        'encoder.layers.encoder_layer_0.self_attention.out_proj.weight':
        'backbone.layers.0.attn.proj.weight',
        'encoder.layers.encoder_layer_1.ln_2.bias':
        'backbone.layers.1.ln2.bias',
        'encoder.layers.encoder_layer_0.mlp.0.weight':
        'backbone.layers.0.ffn.layers.0.0.weight',
        'encoder.layers.encoder_layer_0.mlp.3.bias':
        'backbone.layers.0.ffn.layers.1.bias',
        'encoder.ln.weight': 'backbone.ln1.weight',
        'heads.head.weight': 'head.layers.head.weight',
        'heads.head.bias': 'head.layers.head.bias',
    }
    for src, dst in expected.items():
        assert torch.equal(out[dst], tv_state_dict[src]), src


@pytest.mark.parametrize('prefix', ['model.', 'module.', 'module.model.'])
def test_prefixes_are_stripped(tv_state_dict, prefix):
    wrapped = {prefix + k: v for k, v in tv_state_dict.items()}
    assert list(convert_torchvision_vit(wrapped)) == list(
        convert_torchvision_vit(tv_state_dict))


def test_legacy_mlp_names_and_pre_logits(tv_state_dict):

    def old_name(key):
        key = key.replace('mlp.0.', 'mlp.linear_1.')
        return key.replace('mlp.3.', 'mlp.linear_2.')

    legacy = {old_name(k): v for k, v in tv_state_dict.items()}
    legacy['heads.pre_logits.weight'] = torch.zeros(8, 8)
    out = convert_torchvision_vit(legacy)
    assert 'backbone.layers.1.ffn.layers.0.0.weight' in out
    assert 'backbone.layers.1.ffn.layers.1.weight' in out
    assert 'head.layers.pre_logits.weight' in out


def test_unknown_key_and_format_raise(tv_state_dict):
    extra = dict(tv_state_dict)
    extra['encoder.layers.encoder_layer_0.gamma'] = torch.ones(8)
    with pytest.raises(ValueError, match='encoder_layer_0.gamma'):
        convert_torchvision_vit(extra)
    timm_like = {
        'cls_token': torch.zeros(1, 1, 8),
        'blocks.0.norm1.weight': torch.ones(8)
    }
    with pytest.raises(
            ValueError, match='torchvision VisionTransformer format'):
        convert_torchvision_vit(timm_like)


@pytest.mark.e2e
def test_cli_reports_bad_input(tmp_path, repo_root, subprocess_env):
    src = osp.join(tmp_path, 'bad.pth')
    dst = osp.join(tmp_path, 'out.pth')
    torch.save({'foo': torch.zeros(1)}, src)
    for path, message in [(src, 'torchvision VisionTransformer format'),
                          (src + '.missing', 'checkpoint not found')]:
        proc = run_tool('tools/model_converters/last_vit2mmlocat.py', path,
                        dst)
        assert proc.returncode != 0
        assert message in proc.stderr and 'Traceback' not in proc.stderr
        assert not osp.exists(dst)
