"""CLIPViT against an independent OpenAI-CLIP image-tower reference."""
import json
import os.path as osp
from collections import OrderedDict

import pytest
import torch
from helpers.harness import run_tool
from helpers.references import spec_lazy_strike
from torch import nn

import mmlocat  # noqa: F401  (registers the mmlocat scope)
from mmlocat.models import CLIPViT
from mmlocat.utils.checkpoint_io import load_state_dict_reported
from mmlocat.utils.converters import convert_clip

WIDTH, LAYERS, HEADS, OUT, PATCH = 32, 2, 4, 16, 8
ARCH = dict(
    embed_dims=WIDTH,
    num_layers=LAYERS,
    num_heads=HEADS,
    feedforward_channels=4 * WIDTH,
    output_dims=OUT)


class QuickGELU(nn.Module):

    def forward(self, x):
        return x * torch.sigmoid(1.702 * x)


class ResidualAttentionBlock(nn.Module):
    """OpenAI CLIP block: sequence-first MHA and a QuickGELU MLP."""

    def __init__(self, width, heads):
        super().__init__()
        self.attn = nn.MultiheadAttention(width, heads)
        self.ln_1 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(
            OrderedDict(
                c_fc=nn.Linear(width, width * 4),
                gelu=QuickGELU(),
                c_proj=nn.Linear(width * 4, width)))
        self.ln_2 = nn.LayerNorm(width)

    def forward(self, x):
        y = self.ln_1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class Transformer(nn.Module):

    def __init__(self, width, layers, heads):
        super().__init__()
        self.resblocks = nn.Sequential(
            *[ResidualAttentionBlock(width, heads) for _ in range(layers)])

    def forward(self, x):
        return self.resblocks(x)


class OpenAIVisual(nn.Module):
    """OpenAI CLIP VisionTransformer; pooling 'cls' or LazyStrike."""

    def __init__(self, resolution=32):
        super().__init__()
        self.conv1 = nn.Conv2d(3, WIDTH, PATCH, PATCH, bias=False)
        self.class_embedding = nn.Parameter(torch.randn(WIDTH))
        grid = resolution // PATCH
        self.positional_embedding = nn.Parameter(
            torch.randn(grid * grid + 1, WIDTH))
        self.ln_pre = nn.LayerNorm(WIDTH)
        self.transformer = Transformer(WIDTH, LAYERS, HEADS)
        self.ln_post = nn.LayerNorm(WIDTH)
        self.proj = nn.Parameter(torch.randn(WIDTH, OUT))

    def forward(self, x, pooling='cls'):
        x = self.conv1(x).flatten(2).permute(0, 2, 1)
        cls = self.class_embedding.expand(x.shape[0], 1, -1)
        x = torch.cat([cls, x], dim=1) + self.positional_embedding
        x = self.ln_pre(x)
        x = self.transformer(x.permute(1, 0, 2)).permute(1, 0, 2)
        x = self.ln_post(x)  # per token: same as ln_post(x[:, 0])
        pooled = x[:, 0] if pooling == 'cls' else spec_lazy_strike(x[:, 1:])
        return pooled @ self.proj


def randomise_(model, seed):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            if 'ln' in name and name.endswith('weight'):
                p.copy_(1 + 0.2 * noise)
            else:
                p.copy_(0.1 * noise)
    return model.eval()


@pytest.fixture(scope='module')
def reference():
    return randomise_(OpenAIVisual(), seed=3)


def clip_vit(**kwargs):
    kwargs.setdefault('img_size', 32)
    kwargs.setdefault('arch', ARCH)
    return CLIPViT(patch_size=PATCH, **kwargs).eval()


def full_clip_state_dict(visual):
    """Image tower under ``visual.`` plus text-tower keys to be dropped."""
    sd = OrderedDict(
        ('visual.' + k, v) for k, v in visual.state_dict().items())
    sd['transformer.resblocks.0.ln_1.weight'] = torch.ones(8)
    sd['token_embedding.weight'] = torch.zeros(10, 8)
    sd['text_projection'] = torch.zeros(8, OUT)
    sd['logit_scale'] = torch.tensor(4.6)
    return sd


CONVERTER = 'tools/model_converters/clip2mmlocat.py'


@pytest.mark.parametrize('pooling', ['cls', 'lazy_strike'])
def test_parity_with_openai_layout(reference, pooling):
    model = clip_vit(pooling=pooling)
    load_state_dict_reported(model, convert_clip(reference.state_dict()))
    x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        ours = model(x)[0]
        ref = reference(x, pooling=pooling)
    assert ours.shape == (2, OUT)
    torch.testing.assert_close(ours, ref, atol=1e-4, rtol=0)


@pytest.mark.e2e
def test_cli_converts_full_clip_checkpoint(reference, tmp_path, repo_root,
                                           subprocess_env):
    src = osp.join(tmp_path, 'clip.pt')
    dst = osp.join(tmp_path, 'clip_mmlocat.pth')
    torch.save(full_clip_state_dict(reference), src)
    proc = run_tool(CONVERTER, src, dst, '--act', 'quick_gelu')
    assert proc.returncode == 0, proc.stderr
    sd = torch.load(dst, map_location='cpu', weights_only=True)['state_dict']
    assert all(k.startswith('backbone.') for k in sd)
    meta = torch.load(dst, map_location='cpu', weights_only=True)['meta']
    assert meta['clip']['act'] == 'quick_gelu'
    assert meta['clip']['weights'] == 'clip.pt'
    assert len(meta['clip']['sha256']) == 64
    # the backbone loads it strictly through init_cfg
    model = clip_vit(
        pooling='lazy_strike',
        init_cfg=dict(type='Pretrained', checkpoint=dst, prefix='backbone.'))
    model.init_weights()
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(
            model(x)[0], reference(x, 'lazy_strike'), atol=1e-4, rtol=0)


def test_position_embedding_resampled_for_other_sizes(reference):
    # weights for 32x32 loaded into a 48x48 model; any input size runs
    model = clip_vit(img_size=48, out_type='featmap', out_indices=(0, 1))
    load_state_dict_reported(model, convert_clip(reference.state_dict()))
    for size in (48, 64):
        with torch.no_grad():
            outs = model(torch.randn(1, 3, size, size))
        assert [o.shape
                for o in outs] == [(1, WIDTH, size // 8, size // 8)] * 2


@pytest.mark.parametrize('size', [(32, 32), (40, 56)])
def test_dense_featmap_taps(size):
    model = clip_vit(out_type='featmap', out_indices=(0, 1), frozen=True)
    with torch.no_grad():
        outs = model(torch.randn(2, 3, *size))
    assert len(outs) == 2
    for o in outs:
        assert o.shape == (2, WIDTH, size[0] // PATCH, size[1] // PATCH)


def test_layout_and_named_archs():
    model = clip_vit()
    assert model.patch_embed.projection.bias is None  # conv1 has no bias
    assert not isinstance(model.pre_norm, nn.Identity)  # ln_pre
    assert model.pre_norm.eps == 1e-5 and model.ln1.eps == 1e-5
    act = model.layers[0].ffn.layers[0][1]
    assert type(act).__name__ == 'QuickGELU'
    assert model.proj.shape == (WIDTH, OUT)
    assert model.get_layer_depth('proj') == (LAYERS + 1, LAYERS + 2)
    meta = torch.device('meta')
    with meta:
        base = CLIPViT(arch='base')
    assert base.proj.shape == (768, 512) and len(base.layers) == 12
    with pytest.raises(ValueError, match='pre_norm'):
        clip_vit(pre_norm=False)


@pytest.mark.e2e
def test_cli_reads_openai_torchscript_archive(reference, tmp_path, repo_root,
                                              subprocess_env):
    # OpenAI's released .pt files are TorchScript archives, not pickles
    src = osp.join(tmp_path, 'ViT-tiny.pt')
    dst = osp.join(tmp_path, 'converted.pth')
    x = torch.randn(1, 3, 32, 32)
    torch.jit.save(torch.jit.trace(reference, x), src)
    proc = run_tool(CONVERTER, src, dst, '--prefix', '', '--act', 'quick_gelu')
    assert proc.returncode == 0, proc.stderr
    sd = torch.load(dst, map_location='cpu', weights_only=True)['state_dict']
    model = clip_vit(pooling='cls')
    load_state_dict_reported(model, sd)
    with torch.no_grad():
        torch.testing.assert_close(
            model(x)[0], reference(x), atol=1e-4, rtol=0)


@pytest.mark.e2e
def test_cli_needs_the_activation(reference, tmp_path, repo_root,
                                  subprocess_env):
    """The weights do not say QuickGELU or GELU: no silent guess."""
    src = osp.join(tmp_path, 'clip.pt')
    torch.save(full_clip_state_dict(reference), src)
    proc = run_tool(CONVERTER, src, osp.join(tmp_path, 'out.pth'))
    assert proc.returncode != 0
    assert 'one of the arguments --model --model-config --act is required' \
        in proc.stderr


def test_activation_fallback_is_logged(monkeypatch):
    """Without a recorded activation CLIPViT says which one it takes."""
    import mmlocat.models.backbones.clip_vit as module
    logged = []
    monkeypatch.setattr(module, 'print_log',
                        lambda msg, **kwargs: logged.append(msg))
    assert clip_vit().act == 'quick_gelu'
    assert len(logged) == 1 and "act='gelu'" in logged[0]
    clip_vit(act='gelu')
    assert len(logged) == 1  # an explicit choice is not logged


def test_activation_option_and_checkpoint_record(reference, tmp_path):
    gelu = clip_vit(act='gelu')
    assert type(gelu.layers[0].ffn.layers[0][1]) is nn.GELU
    assert gelu.layers[0].ffn.layers[0][1].approximate == 'none'
    with pytest.raises(ValueError, match='act must be one of'):
        clip_vit(act='relu')
    path = osp.join(tmp_path, 'c.pth')
    from mmlocat.utils.checkpoint_io import save_checkpoint
    save_checkpoint(
        convert_clip(reference.state_dict()),
        path,
        meta=dict(clip=dict(act='gelu')))
    init_cfg = dict(type='Pretrained', checkpoint=path)
    # act=None follows the checkpoint's record ...
    follows = clip_vit(init_cfg=init_cfg)
    assert follows.act == 'gelu'
    assert type(follows.layers[1].ffn.layers[0][1]) is nn.GELU
    # ... also when mmseg injects the checkpoint as ``pretrained=``
    assert clip_vit(pretrained=path).act == 'gelu'
    # ... and an explicit other activation is refused when loading.
    wrong = clip_vit(act='quick_gelu', init_cfg=init_cfg)
    with pytest.raises(
            ValueError,
            match=r"c\.pth was converted from a CLIP with act='gelu' but this "
            r"CLIPViT has act='quick_gelu'"):
        wrong.init_weights()


@pytest.mark.e2e
def test_cli_reads_activation_and_shapes_from_a_model_config(
        reference, tmp_path, repo_root, subprocess_env):
    src = osp.join(tmp_path, 'clip.pt')
    torch.save(full_clip_state_dict(reference), src)
    vision = dict(image_size=32, layers=LAYERS, width=WIDTH, patch_size=PATCH)
    cfg = tmp_path / 'tiny-quickgelu.json'
    cfg.write_text(
        json.dumps(dict(embed_dim=OUT, quick_gelu=True, vision_cfg=vision)))
    dst = osp.join(tmp_path, 'out.pth')
    proc = run_tool(CONVERTER, src, dst, '--model-config', cfg)
    assert proc.returncode == 0, proc.stderr
    meta = torch.load(dst, map_location='cpu', weights_only=True)['meta']
    assert meta['clip']['name'] == 'tiny-quickgelu'
    assert meta['clip']['act'] == 'quick_gelu'
    # A config that disagrees with the weights is refused, naming both.
    cfg.write_text(
        json.dumps(dict(embed_dim=OUT, vision_cfg=dict(vision, layers=3))))
    proc = run_tool(CONVERTER, src, dst, '--model-config', cfg)
    assert proc.returncode != 0
    assert 'the model config says vision layers 3, the weights have 2' in \
        proc.stderr
