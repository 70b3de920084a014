"""The tiny source checkpoints have the real models' key layout.

Each source of :mod:`helpers.sources` is compared with the
full-size model of the real package: the same keys, the same depth, patch,
input and joint sizes; only the width (and what scales with it) differs.
open_clip's own towers are built on the meta device (no memory); timm's
models cannot be (their stochastic-depth rule calls ``.item()``), so the
B-size ones are built on the CPU and EVA02-L (1.2 GB) is left out: its
source takes the same path as EVA02-B's.
"""
import pytest
import torch
from helpers import sources

PATCH_KERNELS = ('patch_embed.proj.weight', 'conv_proj.weight', 'conv1.weight')
POSITIONS = ('pos_embed', 'pos_embedding', 'positional_embedding')


def _shapes(module: torch.nn.Module) -> dict:
    return {k: tuple(v.shape) for k, v in module.state_dict().items()}


def _same_layout(tiny: dict, real: dict) -> None:
    assert set(tiny) == set(real)
    for key, shape in real.items():
        assert len(tiny[key]) == len(shape), key
    # what does not scale with the width is the real model's
    for key in real:
        if key.endswith(PATCH_KERNELS):  # (width, 3, patch, patch)
            assert tiny[key][1:] == real[key][1:], key
        if key.endswith(POSITIONS):  # (..., tokens, width)
            assert tiny[key][:-1] == real[key][:-1], key
        if key.endswith(('head.weight', 'head.bias')):  # classes / joint
            assert tiny[key][0] == real[key][0], key


@pytest.mark.parametrize('name', [
    'vit_base_patch16_224', 'deit_tiny_patch16_224', 'deit_small_patch16_224'
])
def test_timm_vits(name):
    import timm
    tiny = sources.timm_vit_state_dict(name)
    real = timm.create_model(name, pretrained=False)
    _same_layout({k: tuple(v.shape) for k, v in tiny.items()}, _shapes(real))
    assert tiny['blocks.0.attn.qkv.weight'].shape == (3 * 32, 32)


def test_timm_locat_adds_the_public_gaug_weights():
    tiny = sources.timm_vit_state_dict('deit_tiny_patch16_224', gaug=True)
    gaug = sorted(k for k in tiny if '.attn.gaug.' in k)
    # 3 d + 3 parameters per block (docs/method.md#gaug-gaussian-locality-bias)
    assert len(gaug) == 12 * 4
    head_dims = sources.TINY_WIDTH // sources.TINY_HEADS
    assert tiny['blocks.11.attn.gaug.log_var.weight'].shape == (2, head_dims)
    assert tiny['blocks.11.attn.gaug.log_alpha.bias'].shape == (1, )
    assert not tiny['blocks.0.attn.gaug.log_var.bias'].any()


def test_torchvision_vit_b_16():
    from torchvision.models import vit_b_16
    tiny = sources.torchvision_vit_state_dict('vit_b_16')
    real = vit_b_16()
    _same_layout({k: tuple(v.shape) for k, v in tiny.items()}, _shapes(real))


@pytest.mark.parametrize(
    'name', ['ViT-B-16-quickgelu', 'ViT-L-14-quickgelu', 'EVA02-B-16'])
def test_open_clip_models(name):
    import open_clip
    tiny = sources.open_clip_state_dict(name)
    cfg = open_clip.get_model_config(name)
    device = 'cpu' if cfg['vision_cfg'].get('timm_model_name') else 'meta'
    with torch.device(device):
        real = open_clip.create_model(name, pretrained=None, device=device)
    _same_layout({k: tuple(v.shape) for k, v in tiny.items()}, _shapes(real))
    text = 'text_projection' if 'text_projection' in tiny else \
        'text.text_projection'
    assert tiny[text].shape[-1] == cfg['embed_dim']  # the joint width


def test_tiny_arch_keeps_all_but_the_width():
    from mmlocat.models.backbones.vit_archs import VIT_ARCHS
    arch = dict(VIT_ARCHS['b'], output_dims=512)  # CLIP's ViT-B/16
    tiny = sources.tiny_arch(arch)
    assert tiny == dict(
        arch, embed_dims=32, num_heads=2, feedforward_channels=64)
    assert (tiny['num_layers'], tiny['output_dims']) == (12, 512)


def test_dino_training_checkpoint_layout():
    """main_dino.py's save_dict: student (DDP) and teacher multi-crop
    wrappers (backbone + DINOHead), optimizer, epoch, args, dino_loss."""
    import timm
    ckpt = sources.dino_training_checkpoint()
    assert set(ckpt) == {
        'student', 'teacher', 'optimizer', 'epoch', 'args', 'dino_loss'
    }
    assert (ckpt['args'].arch, ckpt['args'].patch_size) == ('vit_small', 16)
    teacher = ckpt['teacher']
    backbone = {
        k[len('backbone.'):]
        for k in teacher if k.startswith('backbone.')
    }
    real = timm.create_model('vit_small_patch16_224', num_classes=0)
    assert backbone == set(real.state_dict())  # DINO's ViT names = timm's
    assert {k
            for k in teacher if k.startswith('head.')} == {
                'head.mlp.0.weight', 'head.mlp.0.bias', 'head.mlp.2.weight',
                'head.mlp.2.bias', 'head.mlp.4.weight', 'head.mlp.4.bias',
                'head.last_layer.weight_g', 'head.last_layer.weight_v'
            }
    assert set(ckpt['student']) == {'module.' + k for k in teacher}
    assert not torch.equal(ckpt['student']['module.backbone.pos_embed'],
                           teacher['backbone.pos_embed'])
