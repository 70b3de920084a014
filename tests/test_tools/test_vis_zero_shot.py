"""tools/analysis_tools/vis_zero_shot.py writes a readable 4-panel PNG."""
import os.path as osp

import numpy as np
import pytest
import torch
from helpers.harness import run_tool
from PIL import Image

from mmlocat.testing import generate
from mmlocat.testing.voc_cityscapes_writers import VOC_CLASSES
from mmlocat.text import (query_map, save_text_embeddings,
                          zero_shot_class_name_lines)

pytestmark = pytest.mark.e2e

CONFIG = """
_base_ = [{base!r}]
model = dict(
    backbone=dict(
        arch=dict(_delete_=True, embed_dims=32, num_layers=2, num_heads=2,
                  feedforward_channels=64, output_dims=16),
        img_size=32, patch_size=8, init_cfg=None),
    text_embeddings={emb!r},
    test_cfg=dict(crop_size=(32, 32), stride=(16, 16)))
"""


@pytest.mark.timeout(300)
def test_writes_png(tmp_path, repo_root):
    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmseg.registry import MODELS

    from mmlocat.utils.checkpoint_io import save_checkpoint
    paths = generate('pascal_voc', str(tmp_path / 'data'), 1, 1, (48, 64))
    emb = str(tmp_path / 'emb.npy')
    config = tmp_path / 'tiny.py'
    config.write_text(
        CONFIG.format(
            base=osp.join(repo_root, 'configs', 'last',
                          'zeroshot_last-clip-b16_voc20.py'),
            emb=emb))
    # one row per name of the config's class-name file (SCLIP's synonyms)
    queries, query_class = query_map(
        zero_shot_class_name_lines(Config.fromfile(str(config))))
    save_text_embeddings(
        emb,
        np.random.default_rng(0).normal(size=(30, 16)),
        queries,
        query_class=query_class,
        classes=VOC_CLASSES)
    init_default_scope('mmseg')
    torch.manual_seed(0)
    model = MODELS.build(Config.fromfile(str(config)).model)
    save_checkpoint(model.state_dict(), str(tmp_path / 'ckpt.pth'))
    stem = open(osp.join(paths['data_root'],
                         paths['val_split'])).read().split()[0]
    image = osp.join(paths['data_root'], 'JPEGImages', stem + '.jpg')
    gt = osp.join(paths['data_root'], 'SegmentationClass', stem + '.png')
    out = tmp_path / 'vis' / 'panels.png'
    tool = 'tools/analysis_tools/vis_zero_shot.py'
    cmd = [
        str(config),
        str(tmp_path / 'ckpt.pth'), image, '--gt', gt, '--out',
        str(out)
    ]
    proc = run_tool(tool, *cmd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    png = np.asarray(Image.open(out).convert('RGB'))
    # four 3.2-inch panels at 100 dpi side by side
    assert png.shape[1] == 1280 and png.shape[0] > 200
    assert png.std() > 0
    # a missing ground truth is one clear line, no traceback
    proc = run_tool(tool, *cmd[:-4], '--gt', str(tmp_path / 'none.png'))
    assert proc.returncode == 2
    assert 'vis_zero_shot: error: no such file' in proc.stderr
