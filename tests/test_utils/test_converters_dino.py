"""DINO (timm layout) ViT -> LaStViT, with output parity against timm."""
import os.path as osp
import subprocess
import sys

import pytest
import torch
from timm.models.vision_transformer import VisionTransformer as TimmViT

import mmlocat  # noqa: F401  (registers the mmlocat scope)
from mmlocat.models import LaStViT
from mmlocat.testing.references import spec_lazy_strike
from mmlocat.utils.checkpoint_io import load_state_dict_reported
from mmlocat.utils.converters import convert_dino

ARCH = dict(embed_dims=48, num_layers=2, num_heads=3, feedforward_channels=96)


@pytest.fixture(scope='module')
def dino():
    """DINO's ViT: timm layout, LayerNorm eps 1e-6, qkv bias."""
    torch.manual_seed(5)
    model = TimmViT(
        img_size=32,
        patch_size=8,
        embed_dim=48,
        depth=2,
        num_heads=3,
        mlp_ratio=2.0,
        qkv_bias=True,
        num_classes=0)
    gen = torch.Generator().manual_seed(6)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            if 'norm' in name and name.endswith('weight'):
                p.copy_(1 + 0.2 * noise)
            else:
                p.copy_(0.1 * noise)
    return model.eval()


def lastvit(**kwargs):
    return LaStViT(arch=ARCH, img_size=32, patch_size=8, **kwargs).eval()


@pytest.mark.parametrize('pooling,k', [('cls', 1), ('lazy_strike', 1),
                                       ('lazy_strike', 3)])
def test_parity_with_timm_dino(dino, pooling, k):
    model = lastvit(pooling=pooling, topk=k)
    load_state_dict_reported(model, convert_dino(dino.state_dict()))
    x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        tokens = dino.forward_features(x)  # after the final norm
        ref = tokens[:, 0] if pooling == 'cls' else spec_lazy_strike(
            tokens[:, 1:], k)
        ours = model(x)[0]
    torch.testing.assert_close(ours, ref, atol=1e-4, rtol=0)


def test_prefixes_and_head_dropped(dino):
    sd = {'module.backbone.' + k: v for k, v in dino.state_dict().items()}
    sd['module.head.mlp.0.weight'] = torch.zeros(4, 48)
    sd['module.head.last_layer.weight_g'] = torch.zeros(4, 1)
    out = convert_dino(sd)
    assert set(out) == set(convert_dino(dino.state_dict()))
    assert not any(k.startswith('head') for k in out)
    assert torch.equal(out['patch_embed.projection.weight'],
                       dino.patch_embed.proj.weight)
    assert torch.equal(out['layers.1.ffn.layers.0.0.weight'],
                       dino.blocks[1].mlp.fc1.weight)
    assert torch.equal(out['layers.0.ln2.bias'], dino.blocks[0].norm2.bias)
    assert torch.equal(out['ln1.weight'], dino.norm.weight)
    with pytest.raises(ValueError, match='head.mlp.0.weight'):
        convert_dino(sd, drop_head=False)


def test_unknown_layouts_raise(dino):
    sd = dict(dino.state_dict())
    sd['reg_token'] = torch.zeros(1, 4, 48)  # DINOv2 registers
    with pytest.raises(ValueError, match='reg_token'):
        convert_dino(sd)
    with pytest.raises(ValueError, match='DINO / timm ViT format'):
        convert_dino({'conv_proj.weight': torch.zeros(1)})


def test_cli_with_prefix(dino, tmp_path, repo_root, subprocess_env):
    src = osp.join(tmp_path, 'dino_deitsmall8.pth')
    dst = osp.join(tmp_path, 'dino_mmlocat.pth')
    torch.save(dino.state_dict(), src)
    proc = subprocess.run(
        [sys.executable, 'tools/model_converters/dino2mmlocat.py', src, dst],
        cwd=repo_root,
        env=subprocess_env,
        capture_output=True,
        text=True,
        timeout=300)
    assert proc.returncode == 0, proc.stderr
    model = lastvit(
        init_cfg=dict(type='Pretrained', checkpoint=dst, prefix='backbone.'))
    model.init_weights()
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        ref = spec_lazy_strike(dino.forward_features(x)[:, 1:])
        torch.testing.assert_close(model(x)[0], ref, atol=1e-4, rtol=0)
