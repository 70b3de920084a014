"""DINO (timm layout) ViT -> LaStViT, with output parity against timm;
bare backbones and DINO's training checkpoints (main_dino.py's layout,
built here at random init)."""
import argparse
import os.path as osp

import pytest
import timm
import torch
import torch.nn.functional as F
from helpers.harness import run_tool
from helpers.references import spec_lazy_strike
from helpers.tiny_archs import DINO_S2
from timm.models.vision_transformer import VisionTransformer as TimmViT
from torch import nn

import mmlocat  # noqa: F401  (registers the mmlocat scope)
from mmlocat.models import LaStViT
from mmlocat.utils.checkpoint_io import (load_state_dict_reported,
                                         read_checkpoint)
from mmlocat.utils.converters import convert_dino, dino_backbone_weights

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


@pytest.mark.e2e
def test_cli_with_prefix(dino, tmp_path, repo_root, subprocess_env):
    src = osp.join(tmp_path, 'dino_deitsmall8.pth')
    dst = osp.join(tmp_path, 'dino_mmlocat.pth')
    torch.save(dino.state_dict(), src)
    proc = run_tool('tools/model_converters/dino2mmlocat.py', src, dst)
    assert proc.returncode == 0, proc.stderr
    model = lastvit(
        init_cfg=dict(type='Pretrained', checkpoint=dst, prefix='backbone.'))
    model.init_weights()
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        ref = spec_lazy_strike(dino.forward_features(x)[:, 1:])
        torch.testing.assert_close(model(x)[0], ref, atol=1e-4, rtol=0)


# --- DINO's training-checkpoint layout (main_dino.py) ----------------------


class _DinoHead(nn.Module):
    """DINO's projection head (``vision_transformer.DINOHead``, 3 layers,
    no BN): ``mlp.{0,2,4}`` and a weight-normed ``last_layer``."""

    def __init__(self, in_dim, out_dim=32, hidden=16, bottleneck=8):
        super().__init__()
        self.mlp = nn.Sequential(
            nn.Linear(in_dim, hidden), nn.GELU(), nn.Linear(hidden, hidden),
            nn.GELU(), nn.Linear(hidden, bottleneck))
        self.last_layer = nn.utils.weight_norm(
            nn.Linear(bottleneck, out_dim, bias=False))

    def forward(self, x):
        return self.last_layer(F.normalize(self.mlp(x), dim=-1))


class _MultiCrop(nn.Module):
    """``utils.MultiCropWrapper``: ``backbone`` (its ``head`` an
    Identity) and ``head``."""

    def __init__(self, backbone, head):
        super().__init__()
        backbone.head = nn.Identity()
        self.backbone, self.head = backbone, head

    def forward(self, x):
        return self.head(self.backbone(x))


class _DDP(nn.Module):
    """What DistributedDataParallel adds to the student's keys."""

    def __init__(self, module):
        super().__init__()
        self.module = module


def _vit_small(seed):
    """timm's vit_small_patch16_224 (DINO's ViT-S/16 key names) at random
    init, 2 of its 12 blocks to stay small."""
    torch.manual_seed(seed)
    return timm.create_model(
        'vit_small_patch16_224', pretrained=False, depth=2, num_classes=0)


@pytest.fixture(scope='module')
def dino_training_checkpoint(tmp_path_factory):
    """``checkpoint0080.pth`` as main_dino.py saves it: student (DDP),
    teacher, optimizer (one AdamW step), epoch, args, dino_loss,
    fp16_scaler."""
    student = _DDP(_MultiCrop(_vit_small(10), _DinoHead(384)))
    teacher = _MultiCrop(_vit_small(11), _DinoHead(384))
    optimizer = torch.optim.AdamW(student.parameters(), lr=1e-4)
    student.module(torch.randn(1, 3, 224, 224)).sum().backward()
    optimizer.step()
    args = argparse.Namespace(
        arch='vit_small',
        patch_size=16,
        out_dim=32,
        norm_last_layer=True,
        momentum_teacher=0.996,
        global_crops_scale=(0.4, 1.0),
        local_crops_number=8,
        data_path='/path/to/imagenet/train',
        output_dir='.',
        use_fp16=True,
        lr=0.0005,
        epochs=100)
    path = tmp_path_factory.mktemp('dino') / 'dino0080.pth'
    torch.save(
        dict(
            student=student.state_dict(),
            teacher=teacher.state_dict(),
            optimizer=optimizer.state_dict(),
            epoch=81,
            args=args,
            dino_loss=dict(center=torch.zeros(1, 32)),
            fp16_scaler=dict(
                scale=65536.0, growth_factor=2.0, _growth_tracker=0)), path)
    return str(path), student.module.backbone.eval(), teacher.backbone.eval()


def _small_lastvit(**kwargs):
    return LaStViT(arch=DINO_S2, img_size=224, patch_size=16, **kwargs).eval()


CONVERTER = 'tools/model_converters/dino2mmlocat.py'


@pytest.mark.parametrize('key', ['teacher', 'student'])
@pytest.mark.e2e
def test_cli_converts_dino_training_checkpoints(dino_training_checkpoint,
                                                tmp_path, repo_root,
                                                subprocess_env, key):
    src, student, teacher = dino_training_checkpoint
    dst = str(tmp_path / f'{key}.pth')
    extra = [] if key == 'teacher' else ['--checkpoint-key', 'student']
    proc = run_tool(CONVERTER, src, dst, *extra)
    assert proc.returncode == 0, proc.stderr
    assert (f"DINO training checkpoint (epoch 81, arch vit_small, patch "
            f"16): the {key}'s backbone") in proc.stdout
    assert 'dropped 8 head tensors (head.*)' in proc.stdout
    other = 'student' if key == 'teacher' else 'teacher'
    assert (f'not converted: {other}, optimizer, epoch, args, dino_loss, '
            'fp16_scaler') in proc.stdout
    saved = torch.load(dst, weights_only=True)
    assert saved['meta']['checkpoint_key'] == key
    assert saved['meta']['epoch'] == 81
    model = _small_lastvit(
        init_cfg=dict(type='Pretrained', checkpoint=dst, prefix='backbone.'))
    model.init_weights()
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(3))
    source = teacher if key == 'teacher' else student
    with torch.no_grad():
        ours = model(x)[0]
        ref = spec_lazy_strike(source.forward_features(x)[:, 1:])
        other_net = student if key == 'teacher' else teacher
        other_ref = spec_lazy_strike(other_net.forward_features(x)[:, 1:])
    torch.testing.assert_close(ours, ref, atol=1e-4, rtol=0)
    assert (ours - other_ref).abs().max() > 1e-2


def test_dino_backbone_weights_layouts(dino_training_checkpoint):
    src, _, teacher = dino_training_checkpoint
    checkpoint = read_checkpoint(src, safe_globals=[argparse.Namespace])
    weights = dino_backbone_weights(checkpoint)
    assert weights.layout == 'training' and weights.key == 'teacher'
    assert weights.meta['arch'] == 'vit_small'
    assert set(weights.state_dict) == set(teacher.state_dict())
    assert sorted(weights.head) == sorted('head.' + k
                                          for k in _DinoHead(384).state_dict())
    bare = dino_backbone_weights(teacher.state_dict(), key='student')
    assert bare.layout == 'backbone' and bare.key is None and not bare.head
    assert 'bare DINO backbone' in bare.describe()
    with pytest.raises(ValueError, match="without 'student'"):
        dino_backbone_weights(dict(teacher=checkpoint['teacher']), 'student')
    with pytest.raises(ValueError, match='key must be one of'):
        dino_backbone_weights(checkpoint, 'ema')


@pytest.mark.e2e
def test_cli_refuses_what_it_cannot_read(dino_training_checkpoint, tmp_path,
                                         repo_root, subprocess_env):
    src, _, _ = dino_training_checkpoint
    checkpoint = read_checkpoint(src, safe_globals=[argparse.Namespace])
    partial = tmp_path / 'teacher_only.pth'
    torch.save(dict(teacher=checkpoint['teacher'], epoch=3), partial)
    proc = run_tool(CONVERTER, str(partial), str(tmp_path / 'o.pth'),
                    '--checkpoint-key', 'student')
    assert proc.returncode == 2 and 'Traceback' not in proc.stderr
    assert "dino2mmlocat: error:" in proc.stderr
    assert "without 'student'" in proc.stderr
