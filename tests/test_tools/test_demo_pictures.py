"""tools/demo.py's PNGs carry a colour key (issue 36), drawn through the
real path: a random-init demo model, the generated ADE20K format."""
import importlib.util
import os
import os.path as osp

import cv2
import torch

from mmlocat.testing import generate
from mmlocat.utils.checkpoint_io import save_checkpoint


def test_demo_png_has_a_colour_key_panel(repo_root, tmp_path):
    from mmengine.config import Config
    from mmengine.registry import MODELS, init_default_scope
    spec = importlib.util.spec_from_file_location(
        'demo_tool', osp.join(repo_root, 'tools/demo.py'))
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    data = str(tmp_path / 'data')
    generate('ade20k', data, num_train=1, num_val=1, img_size=(64, 64))
    init_default_scope('mmseg')
    torch.manual_seed(0)
    model = MODELS.build(Config.fromfile(demo.CONFIGS['locat']).model)
    work = str(tmp_path / 'work')
    os.makedirs(work)
    ckpt = osp.join(work, 'random.pth')
    save_checkpoint(model.state_dict(), ckpt)
    with open(osp.join(work, 'last_checkpoint'), 'w') as f:
        f.write(ckpt)
    png, = demo.visualise(work, data, 1)
    # save_panels: 3.2 inches at 100 dpi per panel; image, ground truth,
    # prediction, patch score and the colour key
    assert cv2.imread(png).shape[1] == 5 * 320
