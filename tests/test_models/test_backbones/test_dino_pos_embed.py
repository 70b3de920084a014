"""DINO's position-embedding interpolation
(``pos_embed_cfg=dict(resample='dino')``) against timm's DINO ViT-S/16
architecture at random init, at a non-224 size.

timm's DINO models resample by target size with antialiasing (timm's
``resample_abs_pos_embed``), which is not DINO's own rule, so the reference
embedding is written here from DINO's ``interpolate_pos_encoding`` semantics
(scale factor ``(n + 0.1) / sqrt(N)``, bicubic, no antialias) and fed to
timm's own blocks.
"""
import math

import pytest
import timm
import torch
import torch.nn.functional as F
from helpers.tiny_archs import DINO_S2

import mmlocat  # noqa: F401
from mmlocat.models import LaStViT
from mmlocat.models.backbones.pos_embed import dino_resample_pos_embed
from mmlocat.utils.checkpoint_io import load_state_dict_reported
from mmlocat.utils.converters import convert_dino


def dino_reference_pos(pos_embed, img_h, img_w, patch=16):
    """DINO: ``B, nc, w, h = x.shape`` names the height ``w``; the first
    scale factor therefore goes to the rows."""
    n = pos_embed.shape[1] - 1
    side = int(math.sqrt(n))
    w0, h0 = img_h // patch + 0.1, img_w // patch + 0.1
    grid = pos_embed[:, 1:].reshape(1, side, side, -1).permute(0, 3, 1, 2)
    grid = F.interpolate(
        grid,
        scale_factor=(w0 / math.sqrt(n), h0 / math.sqrt(n)),
        mode='bicubic')
    assert grid.shape[-2:] == (int(w0), int(h0))
    grid = grid.permute(0, 2, 3, 1).reshape(1, -1, pos_embed.shape[-1])
    return torch.cat((pos_embed[:, :1], grid), dim=1)


@pytest.fixture(scope='module')
def dino():
    torch.manual_seed(0)
    model = timm.create_model(
        'vit_small_patch16_224.dino', pretrained=False, depth=2)
    with torch.no_grad():  # a non-trivial embedding to resample
        model.pos_embed.normal_(std=1.)
    return model.eval()


def dino_lastvit(dino, **kwargs):
    """LaStViT in DINO's ViT-S/16 layout (2 blocks) with its weights."""
    model = LaStViT(
        arch=DINO_S2,
        img_size=224,
        patch_size=16,
        pooling='cls',
        **{
            'pos_embed_cfg': dict(resample='dino'),
            **kwargs
        }).eval()
    load_state_dict_reported(model, convert_dino(dino.state_dict()))
    return model


def timm_tokens(model, x, pos):
    tokens = model.patch_embed.proj(x).flatten(2).transpose(1, 2)
    tokens = torch.cat((model.cls_token.expand(x.shape[0], -1, -1), tokens),
                       dim=1)
    tokens = model.norm_pre(model.pos_drop(tokens + pos))
    return model.norm(model.blocks(tokens))


@pytest.mark.parametrize('hw', [(320, 480), (224, 336), (480, 272)])
def test_lastvit_dino_resampling_matches_dino(dino, hw):
    ours = dino_lastvit(dino)
    x = torch.randn(1, 3, *hw, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref_pos = dino_reference_pos(dino.pos_embed, *hw)
        ref = timm_tokens(dino, x, ref_pos)
        (tokens, ), grid = ours.forward_intermediates(x, [1])
    assert tuple(grid) == (hw[0] // 16, hw[1] // 16)
    torch.testing.assert_close(tokens, ref, atol=1e-5, rtol=1e-5)
    # The host's size-based resampling is measurably different (this is
    # what the option is for), and so is timm's own DINO rule.
    host = dino_lastvit(dino, pos_embed_cfg=dict(resample='host'))
    with torch.no_grad():
        (host_tokens, ), _ = host.forward_intermediates(x, [1])
    assert (host_tokens - ref).abs().max() > 1e-3
    timm_pos = timm.layers.resample_abs_pos_embed(
        dino.pos_embed, (hw[0] // 16, hw[1] // 16), num_prefix_tokens=1)
    assert (timm_pos - ref_pos).abs().max() > 1e-3


def test_corner_padding_is_lost_zero_padding(dino):
    """The default patch embedding (mmcv's ``padding='corner'``) is LOST's
    padding bit for bit: a 375x500 VOC image gives a 24x32 grid and the
    patch tokens of the image zero-padded bottom / right to 384x512 after
    normalisation (``main_lost.py``, transcribed in
    ``tests/helpers/lost_reference.py``); the whole network then
    gives DINO's tokens on that padded image."""
    from helpers.lost_reference import pad_like_lost
    ours = dino_lastvit(dino)
    assert ours.patch_embed.adaptive_padding.padding == 'corner'
    x = torch.randn(1, 3, 375, 500, generator=torch.Generator().manual_seed(2))
    padded = pad_like_lost(x[0], 16)[None]
    assert tuple(padded.shape[-2:]) == (384, 512)
    with torch.no_grad():
        patches, grid = ours.patch_embed(x)
        ref_patches = F.conv2d(
            padded,
            ours.patch_embed.projection.weight,
            ours.patch_embed.projection.bias,
            stride=16)
        ref = timm_tokens(dino, padded,
                          dino_reference_pos(dino.pos_embed, 384, 512))
        (tokens, ), hw = ours.forward_intermediates(x, [1])
    assert tuple(grid) == tuple(hw) == (24, 32)
    assert torch.equal(patches, ref_patches.flatten(2).transpose(1, 2))
    torch.testing.assert_close(tokens, ref, atol=1e-5, rtol=1e-5)


def test_unpadded_patch_embed_crops_as_dino_visualisation(dino):
    """The option ``patch_cfg=dict(padding=0)`` (not LOST's geometry)
    drops the right / bottom remainder: DINO's result on the image cropped
    to a multiple of 16, as DINO's ``visualize_attention.py`` crops."""
    ours = dino_lastvit(dino, patch_cfg=dict(padding=0))
    x = torch.randn(1, 3, 330, 487, generator=torch.Generator().manual_seed(2))
    crop = x[..., :320, :480]
    with torch.no_grad():
        ref = timm_tokens(dino, crop,
                          dino_reference_pos(dino.pos_embed, 320, 480))
        (tokens, ), grid = ours.forward_intermediates(x, [1])
    assert tuple(grid) == (20, 30)
    torch.testing.assert_close(tokens, ref, atol=1e-5, rtol=1e-5)


def test_same_grid_is_unchanged_and_errors():
    pos = torch.randn(1, 1 + 14 * 14, 8)
    assert dino_resample_pos_embed(pos, (14, 14), (14, 14)) is pos
    with pytest.raises(ValueError, match='square'):
        dino_resample_pos_embed(pos, (7, 28), (14, 14))
    with pytest.raises(ValueError, match='prefix tokens'):
        dino_resample_pos_embed(pos, (10, 10), (14, 14))
    with pytest.raises(ValueError, match='pos_embed_cfg.resample must be'):
        LaStViT(arch='deit-small', pos_embed_cfg=dict(resample='bilinear'))
    with pytest.raises(ValueError, match=r"takes only \['resample'\]"):
        LaStViT(
            arch='deit-small',
            pos_embed_cfg=dict(resample='dino', antialias=True))
    with pytest.raises(TypeError, match='must be a dict'):
        LaStViT(arch='deit-small', pos_embed_cfg='dino')
    # one spelling: other keywords are the host's unknown arguments
    with pytest.raises(TypeError, match="'pos_embed_resample'"):
        LaStViT(arch='deit-small', pos_embed_resample='dino')
