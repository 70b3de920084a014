"""tools/analysis_tools/vis_patch_score.py writes the overlay PNGs."""
import importlib.util
import os.path as osp
import sys

import cv2
import numpy as np
import pytest
from helpers.harness import run_tool
from helpers.shrink import write_tiny_config

CONFIG = """
_base_ = [{base!r}]
model = dict(
    backbone=dict(arch=dict(_delete_=True, embed_dims=32, num_layers=1,
                            num_heads=2, feedforward_channels=64)),
    head=dict(num_classes=2, in_channels=32))
"""


@pytest.fixture(scope='module')
def tool(repo_root):
    path = osp.join(repo_root, 'tools', 'analysis_tools', 'vis_patch_score.py')
    spec = importlib.util.spec_from_file_location('vis_patch_score', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_collect_images(tool, tmp_path):
    (tmp_path / 'd' / 'sub').mkdir(parents=True)
    for name in ('d/x.png', 'd/sub/y.jpg', 'd/notes.txt'):
        (tmp_path / name).write_bytes(b'')
    found = tool.collect_images([str(tmp_path / 'd')])
    assert [osp.basename(p) for p in found] == ['x.png', 'y.jpg']
    with pytest.raises(FileNotFoundError):
        tool.collect_images([str(tmp_path / 'missing.png')])


@pytest.mark.timeout(300)
@pytest.mark.e2e
def test_cli_writes_pngs(tmp_path, repo_root):
    import torch
    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmpretrain.registry import MODELS

    from mmlocat.utils.checkpoint_io import save_checkpoint
    config = tmp_path / 'tiny.py'
    config.write_text(
        CONFIG.format(
            base=osp.join(repo_root, 'configs', 'last', 'pib_last-b_in1k.py')))
    init_default_scope('mmpretrain')
    torch.manual_seed(0)
    model = MODELS.build(Config.fromfile(str(config)).model)
    save_checkpoint(model.state_dict(), str(tmp_path / 'ckpt.pth'))
    (tmp_path / 'imgs').mkdir()
    rng = np.random.RandomState(0)
    for name in ('p.jpg', 'q.png'):
        cv2.imwrite(
            str(tmp_path / 'imgs' / name),
            rng.randint(0, 255, (60, 80, 3)).astype(np.uint8))
    out_dir = tmp_path / 'vis'
    proc = run_tool('tools/analysis_tools/vis_patch_score.py', config,
                    tmp_path / 'ckpt.pth', tmp_path / 'imgs', '--out-dir',
                    out_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    printed = [ln for ln in proc.stdout.split() if ln.endswith('.png')]
    expected = [
        str(out_dir / 'p_patch_score.png'),
        str(out_dir / 'q_patch_score.png')
    ]
    assert printed == expected
    for path in expected:
        png = cv2.imread(path)
        assert png is not None
        # three panels side by side: much wider than high
        assert png.shape[1] > 2.5 * png.shape[0]


@pytest.mark.timeout(300)
def test_any_config_backbone_checkpoint(tool, tmp_path, repo_root, monkeypatch,
                                        capsys):
    """A LaSt-ViT UperNet (mmseg) config with a backbone-only checkpoint on
    an arbitrary-size image: the backbone's own patch scores and votes."""
    import torch
    from mmengine.config import Config
    from mmengine.registry import MODELS, init_default_scope

    from mmlocat.apis.analysis import build_analysis_model
    from mmlocat.utils.checkpoint_io import run_cli, save_checkpoint
    cfg = write_tiny_config(
        osp.join(repo_root, 'configs/last/upernet_last-b_ade20k.py'),
        str(tmp_path / 'seg.py'), str(tmp_path))
    init_default_scope('mmseg')
    torch.manual_seed(0)
    model = MODELS.build(Config.fromfile(cfg).model)
    ckpt = str(tmp_path / 'backbone.pth')
    save_checkpoint(
        {
            k: v
            for k, v in model.state_dict().items() if k.startswith('backbone.')
        }, ckpt)
    img = str(tmp_path / 'photo.png')
    cv2.imwrite(
        img,
        np.random.RandomState(1).randint(0, 255,
                                         (50, 130, 3)).astype(np.uint8))
    monkeypatch.setattr(sys, 'argv', [
        'vis_patch_score.py', cfg, ckpt, img, '--out-dir',
        str(tmp_path / 'vis')
    ])
    run_cli('vis_patch_score.py', tool.main)
    # the PNG written, last (mmengine's loggers print to stdout too)
    out = capsys.readouterr().out.splitlines()[-1:]
    assert out == [str(tmp_path / 'vis' / 'photo_patch_score.png')]
    png = cv2.imread(out[0])
    assert png is not None and png.shape[1] > 2.5 * png.shape[0]
    # the maps drawn are the backbone's own
    built, _, prepare, loaded = build_analysis_model(cfg, ckpt)
    assert loaded == 'backbone'
    inputs, _ = prepare(img)
    with torch.no_grad():
        want = built.backbone.forward_with_scores(inputs)
        got = tool.score_maps(built, loaded, inputs)
    torch.testing.assert_close(got['patch_score'], want['patch_score'])
    assert got['patch_score'].shape[-2:] == want['vote_map'].shape[-2:]

    # a checkpoint of another model is refused, naming the missing keys
    save_checkpoint({'backbone.foo': torch.zeros(1)}, str(tmp_path / 'x.pth'))
    monkeypatch.setattr(sys, 'argv', [
        'vis_patch_score.py', cfg,
        str(tmp_path / 'x.pth'), img, '--out-dir',
        str(tmp_path / 'vis')
    ])
    with pytest.raises(SystemExit):
        run_cli('vis_patch_score.py', tool.main)
    assert 'refusing to run a partly random network' in capsys.readouterr().err


def test_no_scores_for_a_plain_classifier(tool):
    import torch
    from mmpretrain.models import ImageClassifier
    model = ImageClassifier(
        backbone=dict(type='ResNet', depth=18), neck=None, head=None)
    with pytest.raises(TypeError, match='no patch scores for ResNet'):
        tool.score_maps(model, 'model', torch.zeros(1, 3, 32, 32))
