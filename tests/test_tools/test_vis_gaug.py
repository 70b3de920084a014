"""tools/analysis_tools/vis_gaug.py: GAug bias and attention grids."""
import importlib.util
import json
import os.path as osp
import sys

import cv2
import numpy as np
import pytest
import torch

from mmlocat.utils.checkpoint_io import run_cli, save_checkpoint

CONFIG = """
_base_ = [{base!r}]
model = dict(
    backbone=dict(arch=dict(_delete_=True, embed_dims=32, num_layers=2,
                            num_heads=2, feedforward_channels=64),
                  img_size=64, patch_size=8),
    head=dict(num_classes=4, in_channels=32))
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=64, edge='short', backend='pillow'),
    dict(type='CenterCrop', crop_size=64),
    dict(type='PackInputs'),
]
test_dataloader = dict(dataset=dict(pipeline=test_pipeline))
"""


@pytest.fixture(scope='module')
def tool(repo_root):
    path = osp.join(repo_root, 'tools', 'analysis_tools', 'vis_gaug.py')
    spec = importlib.util.spec_from_file_location('vis_gaug', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope='module')
def setup(repo_root, tmp_path_factory):
    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmpretrain.registry import MODELS
    tmp = tmp_path_factory.mktemp('vis_gaug')
    config = tmp / 'tiny.py'
    config.write_text(
        CONFIG.format(
            base=osp.join(repo_root, 'configs/locat/locat-t_8xb128_in1k.py')))
    init_default_scope('mmpretrain')
    torch.manual_seed(0)
    model = MODELS.build(Config.fromfile(str(config)).model)
    # trained-looking GAug: varied variances and amplitudes per query
    for layer in model.backbone.layers:
        for lin in (layer.attn.gaug.log_var, layer.attn.gaug.log_alpha):
            torch.nn.init.normal_(lin.weight, std=0.5)
    ckpt = str(tmp / 'ckpt.pth')
    save_checkpoint(model.state_dict(), ckpt)
    # a backbone-only checkpoint, as the converters write
    bb = str(tmp / 'backbone.pth')
    save_checkpoint(
        {
            k: v
            for k, v in model.state_dict().items() if k.startswith('backbone.')
        }, bb)
    imgs = tmp / 'imgs'
    imgs.mkdir()
    rng = np.random.RandomState(0)
    cv2.imwrite(
        str(imgs / 'a.jpg'),
        rng.randint(0, 255, (70, 90, 3)).astype(np.uint8))
    return dict(config=str(config), ckpt=ckpt, backbone=bb, imgs=str(imgs))


def _main(tool, monkeypatch, *argv):
    monkeypatch.setattr(sys, 'argv', ['vis_gaug.py'] + [str(a) for a in argv])
    run_cli('vis_gaug.py', tool.main)


def test_writes_grids_and_json(tool, setup, tmp_path, monkeypatch, capsys):
    out = tmp_path / 'vis'
    _main(tool, monkeypatch, setup['config'], setup['backbone'], setup['imgs'],
          '--queries', '2,3', '7,0', '--out-dir', out)
    expected = [
        str(out / f'a_q{q}_{k}.png') for q in ('2-3', '7-0')
        for k in ('gaug', 'attn')
    ]
    # the PNGs written, last (mmengine's loggers print to stdout too)
    printed = capsys.readouterr().out.splitlines()[-len(expected):]
    assert printed == expected
    for path in expected:
        png = cv2.imread(path)
        assert png is not None and png.shape[0] > 200 and png.shape[1] > 200
    record = json.load(open(out / 'a_gaug.json'))
    assert record['grid'] == [8, 8]
    assert [q['patch'] for q in record['queries']] == [[2, 3], [7, 0]]
    block = record['queries'][0]['blocks']['1']
    assert np.array(block['var']).shape == (2, 2)  # heads x (row, col)
    assert np.array(block['alpha']).shape == (2, )


def test_maps_are_the_models(tool, setup):
    """The bias row equals the module's own dense bias with the clamp off;
    the attention weights times V (then the projection) equal the block's
    real output for the query token."""
    from mmlocat.apis.analysis import build_analysis_model
    model, _, prepare, loaded = build_analysis_model(setup['config'],
                                                     setup['ckpt'])
    assert loaded == 'model'
    inputs, img = prepare(osp.join(setup['imgs'], 'a.jpg'))
    assert img.shape == (64, 64, 3) and inputs.shape == (1, 3, 64, 64)
    attns = tool.gaug_blocks(model.backbone)
    probe = tool.AttentionProbe(attns)
    with torch.no_grad():
        model.backbone(inputs)
    probe.remove()
    index = 2 * 8 + 3
    for block, attn in enumerate(attns):
        x, hw = probe.inputs[block]
        with torch.no_grad():
            maps = tool.query_maps(attn, x, hw, index)
            q = attn.qkv(x).reshape(1, x.shape[1], 3, 2,
                                    16).permute(2, 0, 3, 1, 4)[0]
            attn.gaug.clamp = False
            dense = attn.gaug.compute_bias(q, hw)
            attn.gaug.clamp = True
        assert attn.gaug.clamp  # restored
        np.testing.assert_allclose(
            maps['bias'].reshape(2, -1).numpy(),
            dense[0, :, 1 + index, 1:].numpy(),
            rtol=1e-5,
            atol=1e-7)
        assert maps['bias'].std() > 0
        np.testing.assert_allclose(maps['attn'].sum(-1).numpy(), 1, rtol=1e-5)
        torch.testing.assert_close(
            maps['out'],
            probe.outputs[block][:, 1 + index],
            rtol=1e-5,
            atol=1e-6)
        tool.check_against_model({block: maps}, probe, attn.gaug, index)


def test_bad_input(tool, setup, repo_root, tmp_path, monkeypatch, capsys):
    from mmpretrain.models import VisionTransformer
    with pytest.raises(TypeError, match='needs a mmlocat.LocAtViT'):
        tool.gaug_blocks(VisionTransformer(arch='deit-t', img_size=32))
    for argv, message in (
        ([setup['config'], setup['ckpt'], setup['imgs'], '--queries',
          '8,0'], 'outside the 8x8 patch grid'),
        ([setup['config'], setup['ckpt'], setup['imgs'], '--queries',
          '1'], 'ROW,COL'),
        ([setup['config'], setup['ckpt'], setup['imgs'], '--blocks',
          '2'], 'not a block index'),
    ):
        with pytest.raises(SystemExit) as exc:
            _main(tool, monkeypatch, *argv, '--out-dir', tmp_path / 'o')
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert err.startswith('vis_gaug.py: error:') and message in err, err
