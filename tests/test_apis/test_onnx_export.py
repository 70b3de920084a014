"""ONNX export round trip: onnxruntime equals PyTorch on two input sizes.

Tiny random-init models from the shipped LocAtViT / LaSt-ViT classification
and UperNet segmentation configs are exported by
``tools/deployment/pytorch2onnx.py`` (checkpoint loaded strictly) at two
input sizes each; the PyTorch reference runs the default kernels (GAug
chunked, LazyStrike FFT), not the export substitutes.
"""
import copy
import importlib.util
import os.path as osp
import sys

import numpy as np
import pytest
import torch
from helpers.shrink import write_tiny_config

from mmlocat.apis.onnx_export import (build_export_model, lowpass_as_matmul,
                                      run_onnx)
from mmlocat.utils.checkpoint_io import run_cli, save_checkpoint

LOCAT_T = 'configs/locat/locat-t_8xb128_in1k.py'
UPERNET_LOCAT_B = 'configs/locat/upernet_locat-b_ade20k.py'
TINY_CLS = dict(
    model=dict(
        backbone=dict(
            arch=dict(
                _delete_=True,
                embed_dims=32,
                num_layers=2,
                num_heads=2,
                feedforward_channels=64),
            img_size=64,
            patch_size=16),
        head=dict(num_classes=5, in_channels=32)))


def _tool(repo_root):
    spec = importlib.util.spec_from_file_location(
        'pytorch2onnx', osp.join(repo_root,
                                 'tools/deployment/pytorch2onnx.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write_cls(tmp_path, repo_root, base):
    from mmengine.config import Config
    cfg = Config.fromfile(osp.join(repo_root, base))
    cfg.merge_from_dict(copy.deepcopy(TINY_CLS))
    path = str(tmp_path / 'cls.py')
    cfg.dump(path)
    return path


def _checkpoint(cfg_path, tmp_path):
    torch.manual_seed(0)
    module, _ = build_export_model(cfg_path, None)
    for p in module.parameters():  # away from init symmetries
        p.data.add_(0.05 * torch.randn_like(p))
    ckpt = str(tmp_path / 'model.pth')
    save_checkpoint(module.model.state_dict(), ckpt)
    return ckpt


@pytest.fixture(scope='module')
def tiny(tmp_path_factory, repo_root):
    """``tiny(base)``: ``(config, checkpoint)`` of the tiny model of the
    shipped config ``base`` (a classifier or a UperNet), made once for the
    module's tests (none of them changes the files)."""
    made = {}

    def get(base):
        if base not in made:
            root = tmp_path_factory.mktemp('onnx_tiny')
            if 'upernet' in base:
                cfg = write_tiny_config(
                    osp.join(repo_root, base), str(root / 'seg.py'), str(root))
            else:
                cfg = _write_cls(root, repo_root, base)
            made[base] = cfg, _checkpoint(cfg, root)
        return made[base]

    return get


def _reference(cfg_path, ckpt, inputs):
    """PyTorch with the config's own kernels (no export substitutes)."""
    from mmengine.config import Config
    from mmengine.registry import MODELS, init_default_scope

    from mmlocat.utils.pretrained import load_model_weights
    cfg = Config.fromfile(cfg_path)
    init_default_scope(cfg.default_scope)
    model = MODELS.build(cfg.model).eval()
    load_model_weights(model, ckpt)
    with torch.no_grad():
        return model(inputs, mode='tensor').numpy()


def _export_and_check(tool, monkeypatch, capsys, cfg, ckpt, out, hw, batch,
                      *extra):
    monkeypatch.setattr(sys, 'argv', [
        'pytorch2onnx.py', cfg, ckpt, '--shape',
        str(hw[0]),
        str(hw[1]), '--out', out, '--verify'
    ] + list(extra))
    run_cli('pytorch2onnx.py', tool.main)
    printed = capsys.readouterr().out
    assert 'max abs diff' in printed
    torch.manual_seed(1)
    inputs = torch.randn(batch, 3, *hw)
    got = run_onnx(out, inputs)
    want = _reference(cfg, ckpt, inputs)
    assert got.shape == want.shape
    err = np.abs(got - want).max()
    print(f'{osp.basename(cfg)} {hw}: max abs diff {err:.2e}')
    assert err <= 1e-4
    return got


@pytest.mark.parametrize('base',
                         [LOCAT_T, 'configs/last/last-b_8xb512_in1k.py'])
def test_classifier_round_trip(base, tmp_path, repo_root, monkeypatch, capsys,
                               tiny):
    tool = _tool(repo_root)
    cfg, ckpt = tiny(base)
    for hw in ((64, 64), (48, 80)):  # training grid and another one
        got = _export_and_check(tool, monkeypatch, capsys, cfg, ckpt,
                                str(tmp_path / f'm{hw[0]}.onnx'), hw, 3,
                                '--dynamic-batch')
        assert got.shape == (3, 5)


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    'base', [UPERNET_LOCAT_B, 'configs/last/upernet_last-b_ade20k.py'])
@pytest.mark.slow
def test_upernet_round_trip(base, tmp_path, repo_root, monkeypatch, capsys,
                            tiny):
    cfg, ckpt = tiny(base)
    tool = _tool(repo_root)
    # UPerHead's pooling (scales 1, 2, 3, 6) needs stride-32 sides that
    # every scale divides: inputs in multiples of 192
    for hw in ((192, 192), (192, 384)):
        got = _export_and_check(tool, monkeypatch, capsys, cfg, ckpt,
                                str(tmp_path / f's{hw[1]}.onnx'), hw, 1)
        assert got.shape == (1, 150, hw[0] // 4, hw[1] // 4)


def test_lowpass_as_matmul_equals_fft():
    from mmlocat.models.layers import lazy_strike_pool
    x = torch.randn(2, 10, 24)
    want = lazy_strike_pool(x, topk=2)
    with lowpass_as_matmul([24]):
        got = lazy_strike_pool(x, topk=2)
        with pytest.raises(ValueError, match='no matrix for 7 channels'):
            lazy_strike_pool(torch.randn(1, 4, 7))
    torch.testing.assert_close(got.pooled, want.pooled)
    torch.testing.assert_close(got.votes, want.votes)
    # restored: other widths use the FFT again
    lazy_strike_pool(torch.randn(1, 4, 7))


def test_refuses_detectors_and_partial_checkpoints(tmp_path, repo_root,
                                                   monkeypatch, capsys, tiny):
    tool = _tool(repo_root)
    cfg, ckpt = tiny(LOCAT_T)
    state = torch.load(ckpt, weights_only=False)
    state['state_dict'].pop('head.layers.head.weight')
    partial = str(tmp_path / 'partial.pth')
    torch.save(state, partial)
    for argv, message in (
        ([osp.join(repo_root, 'configs/ovd/fvit_clip-b16_ov-coco.py'),
          ckpt], 'covers classifiers and segmentors'),
        ([cfg, partial], 'head.layers.head.weight'),
    ):
        monkeypatch.setattr(sys, 'argv', ['pytorch2onnx.py'] + argv +
                            ['--out', str(tmp_path / 'x.onnx')])
        with pytest.raises(SystemExit) as exc:
            run_cli('pytorch2onnx.py', tool.main)
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert 'pytorch2onnx.py: error:' in err and message in err, err


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_upernet_sizes_it_cannot_export_are_refused_in_one_line(
        tmp_path, repo_root, monkeypatch, capsys, tiny):
    """500x333, 512 and 16 gave torch's raw error (at 500x333 with the
    whole traced graph); now one line says why and which sizes work, and
    the suggested size exports."""
    cfg, ckpt = tiny(UPERNET_LOCAT_B)
    tool = _tool(repo_root)
    out = str(tmp_path / 'x.onnx')
    for hw, why, nearest in (
        ((500, 333), 'pads the input', '576x384'),
        ((512, 512), 'pools a 16x16 map to 3x3', '576x576'),
        ((16, 16), 'cannot run at 16x16 in PyTorch either', '192x192'),
        ((370, 370), 'not multiples of the patch size 16x16', '384x384'),
    ):
        monkeypatch.setattr(sys, 'argv', [
            'pytorch2onnx.py', cfg, ckpt, '--shape',
            str(hw[0]),
            str(hw[1]), '--out', out
        ])
        with pytest.raises(SystemExit) as exc:
            run_cli('pytorch2onnx.py', tool.main)
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert err.startswith(f'pytorch2onnx.py: error: cannot export at '
                              f'{hw[0]}x{hw[1]}: '), err
        assert why in err and 'height and width multiples of 192' in err
        assert f'(nearest: {nearest})' in err and len(err) < 700, err
        assert not osp.exists(out)
    # a free batch hides the sizes from the pooling even at 192
    monkeypatch.setattr(sys, 'argv', [
        'pytorch2onnx.py', cfg, ckpt, '--shape', '192', '192', '--out', out,
        '--dynamic-batch'
    ])
    with pytest.raises(SystemExit):
        run_cli('pytorch2onnx.py', tool.main)
    assert 'drop --dynamic-batch' in capsys.readouterr().err
    # the suggested size for 500x333 exports and equals PyTorch; so does a
    # size the rule allows that is no multiple of 192 (the refusal is the
    # exporter's constraint, not a stricter one)
    for hw in ((576, 384), (208, 400)):
        got = _export_and_check(tool, monkeypatch, capsys, cfg, ckpt,
                                str(tmp_path / f'{hw[0]}.onnx'), hw, 1)
        assert got.shape == (1, 150, hw[0] // 4, hw[1] // 4)


def test_classifier_exports_at_any_size(tmp_path, repo_root, monkeypatch,
                                        capsys, tiny):
    """No adaptive pooling: sizes that are no multiple of the patch size
    (padded grid) and a one-patch input export and equal PyTorch."""
    tool = _tool(repo_root)
    cfg, ckpt = tiny(LOCAT_T)
    for hw in ((333, 500), (16, 16)):
        got = _export_and_check(tool, monkeypatch, capsys, cfg, ckpt,
                                str(tmp_path / f'c{hw[0]}.onnx'), hw, 1)
        assert got.shape == (1, 5)


def test_exporter_error_is_one_line(tmp_path, tiny):
    """An export that torch itself refuses ends in one short line, not the
    traced graph."""
    from mmlocat.apis.onnx_export import export_onnx
    cfg, _ = tiny(UPERNET_LOCAT_B)
    module, _ = build_export_model(cfg, None)
    # the pooling check passes (192 is exportable), the exporter fails:
    # opset 7 has no operator for the model's attention
    with pytest.raises(RuntimeError) as exc:
        export_onnx(
            module, (192, 192),
            str(tmp_path / 'x.onnx'),
            opset=7,
            dynamic_batch=False)
    message = str(exc.value)
    assert message.startswith('the TorchScript exporter failed at 192x192: ')
    assert '\n' not in message and len(message) < 600, message
