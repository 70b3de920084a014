"""tools/analysis_tools/vis_patch_score.py writes the overlay PNGs."""
import importlib.util
import os.path as osp
import subprocess
import sys

import cv2
import numpy as np
import pytest

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
def test_cli_writes_pngs(tmp_path, repo_root, subprocess_env):
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
    cmd = [
        sys.executable,
        osp.join(repo_root, 'tools', 'analysis_tools', 'vis_patch_score.py'),
        str(config),
        str(tmp_path / 'ckpt.pth'),
        str(tmp_path / 'imgs'), '--out-dir',
        str(out_dir)
    ]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=subprocess_env, timeout=300)
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
