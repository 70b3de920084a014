"""CLIP towers against the real open_clip package.

open_clip models are built at random init (``pretrained=None``, nothing is
downloaded), saved as a user's checkpoint file, converted with the shipped
tools and loaded into mmlocat's towers: the B models must give open_clip's
own ``encode_image`` (and, for F-ViT, its value-path dense map); the L
models convert to the right keys and shapes (built on the meta device).
"""
import importlib.util
import os.path as osp
import sys

import open_clip
import pytest
import torch
import torch.nn.functional as F

import mmlocat  # noqa: F401  (registers the mmlocat scope)
from mmlocat.models import CLIPViT, EVA02CLIPViT
from mmlocat.utils.converters import convert_clip, convert_eva02_clip
from mmlocat.utils.converters.clip import (clip_tower_settings,
                                           open_clip_model_config)
from mmlocat.utils.records import file_sha256, text_sha256, weights_sha256


def _tool(repo_root, name):
    path = osp.join(repo_root, 'tools/model_converters', name + '.py')
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run_tool(monkeypatch, tool, argv):
    monkeypatch.setattr(sys, 'argv', ['tool'] + list(argv))
    tool.main()


@pytest.fixture(scope='module')
def user_files(tmp_path_factory):
    """``name -> (open_clip model, user checkpoint file)``, built once."""
    cache = {}
    root = tmp_path_factory.mktemp('open_clip')

    def get(name):
        if name not in cache:
            if name == 'ViT-B-16-quickgelu':
                # ViT-B-16's weights in the QuickGELU model (same shapes):
                # built on the meta device, the real tensors assigned.
                weights = get('ViT-B-16')[0].state_dict()
                model = _meta_model(name)
                model.load_state_dict(weights, assign=True)
                assert not any(p.is_meta for p in model.parameters())
            else:
                torch.manual_seed(0)
                model = open_clip.create_model(name, pretrained=None)
            model.eval()
            path = str(root / f'{name}.bin')
            torch.save(model.state_dict(), path)
            cache[name] = (model, path)
        return cache[name]

    return get


def _image(size=224):
    return torch.randn(
        1, 3, size, size, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize('name, act', [('ViT-B-16', 'gelu'),
                                       ('ViT-B-16-quickgelu', 'quick_gelu')])
@pytest.mark.slow
def test_clip_b16_matches_encode_image(user_files, tmp_path, repo_root,
                                       monkeypatch, name, act):
    model, src = user_files(name)
    dst = str(tmp_path / 'clip_mmlocat.pth')
    _run_tool(monkeypatch, _tool(repo_root, 'clip2mmlocat'),
              [src, dst, '--model', name])
    saved = torch.load(dst, map_location='cpu', weights_only=True)
    meta = saved['meta']
    assert meta['clip'] == dict(
        name=name,
        weights=osp.basename(src),
        sha256=file_sha256(src),
        act=act,
        text_sha256=text_sha256(model.state_dict()),
        text_act=act,
        # the tower's own weights as saved (issue 34: a copied record fails)
        image_sha256=weights_sha256(saved['state_dict']))
    init_cfg = dict(type='Pretrained', checkpoint=dst, prefix='backbone.')
    ours = CLIPViT(
        arch='b',
        patch_size=16,
        img_size=224,
        pooling='cls',
        init_cfg=init_cfg).eval()
    assert ours.act == act  # act=None followed the checkpoint
    ours.init_weights()
    x = _image()
    with torch.no_grad():
        got = ours(x)[0]
        ref = model.encode_image(x)
    err = (got - ref).abs().max().item()
    print(f'{name}: max |ours - encode_image| = {err:.2e} '
          f'(max |encode_image| {ref.abs().max():.2f})')
    assert err <= 1e-4 and ref.abs().max() > 1
    # The other activation is refused, not silently 5e-2 off.
    other = 'quick_gelu' if act == 'gelu' else 'gelu'
    wrong = CLIPViT(
        arch='b', patch_size=16, img_size=224, act=other, init_cfg=init_cfg)
    with pytest.raises(ValueError, match=f"act='{act}'"):
        wrong.init_weights()


def test_value_path_dense_map_matches_open_clip(user_files):
    """F-ViT's dense map of mmlocat's tower against one computed by hand
    from the open_clip module: the input of its last resblock, then
    ``x + out_proj(v)``, ``x + mlp(ln_2(x))``, ``ln_post``, ``proj``,
    L2 norm."""
    model, _ = user_files('ViT-B-16')
    visual = model.visual
    ours = CLIPViT(arch='b', patch_size=16, img_size=224, act='gelu').eval()
    ours.load_state_dict(convert_clip(model.state_dict()))
    seen = []
    last = visual.transformer.resblocks[-1]
    handle = last.register_forward_pre_hook(
        lambda mod, args: seen.append(args[0]))
    x = _image()
    with torch.no_grad():
        visual(x)
        handle.remove()
        tokens = seen[0]
        if tokens.shape[0] != 1:  # sequence-first transformer
            tokens = tokens.transpose(0, 1)
        width = tokens.shape[-1]
        attn = last.attn
        v = F.linear(
            last.ln_1(tokens), attn.in_proj_weight[2 * width:],
            attn.in_proj_bias[2 * width:])
        y = tokens + attn.out_proj(v)
        y = y + last.mlp(last.ln_2(y))
        ref = F.normalize(visual.ln_post(y[:, 1:]) @ visual.proj, dim=-1)
        ref = ref.transpose(1, 2).reshape(1, -1, 14, 14)
        _, dense = ours.forward_dense(x)
    assert dense.shape == (1, 512, 14, 14)
    torch.testing.assert_close(dense, ref, atol=1e-5, rtol=1e-5)


@pytest.mark.slow
def test_eva02_b16_matches_encode_image(user_files, tmp_path, repo_root,
                                        monkeypatch):
    model, src = user_files('EVA02-B-16')
    dst = str(tmp_path / 'eva_mmlocat.pth')
    _run_tool(monkeypatch, _tool(repo_root, 'eva02_clip2mmlocat'),
              [src, dst, '--model', 'EVA02-B-16'])
    meta = torch.load(dst, map_location='cpu', weights_only=True)['meta']
    assert meta['clip']['name'] == 'EVA02-B-16'
    assert meta['clip']['sha256'] == file_sha256(src)
    ours = EVA02CLIPViT(
        arch='b',
        pooling='cls',
        init_cfg=dict(type='Pretrained', checkpoint=dst,
                      prefix='backbone.')).eval()
    ours.init_weights()
    x = _image()
    with torch.no_grad():
        ref = model.encode_image(x)
        err = (ours(x)[0] - ref).abs().max().item()
    # timm's init leaves the random-init embedding small (~1e-3): the bound
    # is relative to its size as well as absolute.
    scale = ref.abs().max().item()
    print(f'EVA02-B-16: max |ours - encode_image| = {err:.2e} '
          f'(max |encode_image| {scale:.2e})')
    assert err <= 1e-4 and err <= 1e-4 * scale


def test_converter_refuses_the_wrong_tool(user_files, tmp_path, repo_root,
                                          monkeypatch):
    _, src = user_files('ViT-B-16')
    with pytest.raises(SystemExit, match='timm-based tower'):
        _run_tool(monkeypatch, _tool(repo_root, 'clip2mmlocat'),
                  [src, str(tmp_path / 'x.pth'), '--model', 'EVA02-B-16'])
    with pytest.raises(SystemExit, match='not an EVA02-CLIP tower'):
        _run_tool(monkeypatch, _tool(repo_root, 'eva02_clip2mmlocat'),
                  [src, str(tmp_path / 'y.pth'), '--model', 'ViT-B-16'])
    # A config that disagrees with the weights names both values.
    with pytest.raises(
            SystemExit,
            match='the model config says vision width 1024, '
            'the weights have 768'):
        _run_tool(monkeypatch, _tool(repo_root, 'clip2mmlocat'),
                  [src, str(tmp_path / 'z.pth'), '--model', 'ViT-L-14'])


def _meta_model(name):
    with torch.device('meta'):
        return open_clip.create_model(name, pretrained=None, device='meta')


def _shapes(state_dict):
    return {k: tuple(v.shape) for k, v in state_dict.items()}


@pytest.mark.parametrize('name, img, act', [('ViT-L-14', 224, 'gelu'),
                                            ('ViT-L-14-336', 336, 'gelu')])
def test_clip_l14_converts(name, img, act):
    settings = clip_tower_settings(open_clip_model_config(name))
    assert settings == dict(
        layout='openai', act=act, timm_model_name=None, text_act=act)
    converted = convert_clip(_meta_model(name).state_dict())
    with torch.device('meta'):
        ours = CLIPViT(arch='l', patch_size=14, img_size=img, act=act)
    assert _shapes(converted) == _shapes(ours.state_dict())


def test_eva02_l14_336_converts(monkeypatch):
    settings = clip_tower_settings(open_clip_model_config('EVA02-L-14-336'))
    assert settings['layout'] == 'timm'
    # timm's EVA reads its drop-path schedule with .item(): keep that one
    # small tensor on the CPU while the model is built on the meta device.
    linspace = torch.linspace
    monkeypatch.setattr(torch, 'linspace',
                        lambda *a, **k: linspace(*a, **dict(k, device='cpu')))
    converted = convert_eva02_clip(_meta_model('EVA02-L-14-336').state_dict())
    with torch.device('meta'):
        ours = EVA02CLIPViT(arch='l')
    assert ours.patch_resolution == (24, 24)  # 336 px, 14-px patches
    assert _shapes(converted) == _shapes(ours.state_dict())
