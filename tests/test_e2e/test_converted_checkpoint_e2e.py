"""End to end: UperNet LocAtViT-B from a converted checkpoint, as a user.

configs/locat/README.md: convert a timm checkpoint (a plain ViT, or the
released LocAtViT: a timm ViT with GAug) with
``tools/model_converters/locat2mmlocat.py`` to
``checkpoints/locat-b_in1k.pth``, then
``tools/train.py configs/locat/upernet_locat-b_ade20k.py``. The source is a
random-init timm ``vit_base_patch16_224`` at the tiny width of
:mod:`helpers.shrink` (4 blocks, as the shrunk config), saved as safetensors;
the config is the shipped one shrunk by :mod:`helpers.shrink` with its shipped
``init_cfg`` kept (``Pretrained``, ``checkpoint='checkpoints/
locat-b_in1k.pth'``, ``prefix='backbone.'``, resolved in the working
directory, as for the user). UperNet sets ``final_norm=False``: the
converted final norm is left out with one log line, everything else loads.
Two training iterations on generated ADE20K data, then ``tools/test.py`` on
the saved checkpoint.
"""
import os.path as osp

import pytest
import torch
from helpers.harness import run_tool
from helpers.shrink import TINY_DIMS, write_tiny_config
from helpers.sources import TINY_WIDTH, timm_vit_state_dict

from mmlocat.testing import generate

pytestmark = pytest.mark.e2e

SHIPPED = 'configs/locat/upernet_locat-b_ade20k.py'
CHECKPOINT = 'checkpoints/locat-b_in1k.pth'  # the shipped init_cfg's
ITERS = 2
TIMEOUT = 600


@pytest.fixture(scope='module')
def data_root(tmp_path_factory) -> str:
    return generate(
        'ade20k',
        str(tmp_path_factory.mktemp('ade20k')),
        num_train=4,
        num_val=2,
        img_size=(64, 96),
        seed=0)['data_root']


@pytest.mark.parametrize('gaug', [False, True], ids=['vit', 'locat'])
@pytest.mark.slow
def test_train_and_test_from_a_converted_timm_checkpoint(
        gaug, tmp_path, data_root, repo_root):
    from mmengine.config import Config
    from safetensors.torch import save_file
    assert TINY_DIMS == TINY_WIDTH  # the source and the shrunk config agree
    shipped = osp.join(repo_root, SHIPPED)
    init_cfg = Config.fromfile(shipped).model.backbone.init_cfg.to_dict()
    assert init_cfg['checkpoint'] == CHECKPOINT
    # the user's files: timm weights, converted next to the work dirs
    src = str(tmp_path / 'vit_base_patch16_224.safetensors')
    save_file(
        timm_vit_state_dict('vit_base_patch16_224', gaug=gaug, depth=4), src)
    (tmp_path / 'checkpoints').mkdir()
    out = run_tool(
        'tools/model_converters/locat2mmlocat.py',
        src,
        CHECKPOINT,
        cwd=str(tmp_path)).ok(4000)
    assert 'blocks: 4' in out
    converted = torch.load(
        tmp_path / CHECKPOINT, map_location='cpu',
        weights_only=True)['state_dict']
    assert 'backbone.ln1.weight' in converted  # the timm final norm
    cfg = write_tiny_config(
        shipped,
        str(tmp_path / 'upernet_locat-b_ade20k_tiny.py'),
        data_root,
        ITERS,
        extra=dict(model=dict(backbone=dict(init_cfg=init_cfg))))

    log = run_tool(
        'tools/train.py', cfg, '--work-dir', 'train',
        cwd=str(tmp_path)).ok(4000)
    # the final norm of the classification checkpoint is an expected
    # leftover of final_norm=False, named once; everything else loads
    dropped = [line for line in log.splitlines() if 'does not use' in line]
    assert len(dropped) == 1, log[-4000:]
    assert "['ln1.bias', 'ln1.weight']" in dropped[0]
    assert 'final_norm=False' in dropped[0]
    loaded = f'loaded {len(converted) - 4} of {len(converted) - 4} tensors'
    assert loaded in log  # minus ln1 (2) and the classifier head (2)
    if gaug:
        assert 'newly initialised' not in log
    else:  # a plain ViT: GAug starts fresh, nothing else may
        assert 'newly initialised (16)' in log  # 4 blocks x 4 GAug tensors
    ckpt = str(tmp_path / 'train' / f'iter_{ITERS}.pth')
    trained = torch.load(ckpt, map_location='cpu', weights_only=False)
    for key in ('patch_embed.projection.weight', 'layers.0.attn.qkv.weight',
                'layers.3.ffn.layers.1.weight'):
        # two AdamW steps (lr 6e-5) from the converted weights
        torch.testing.assert_close(
            trained['state_dict']['backbone.' + key],
            converted['backbone.' + key],
            atol=1e-3,
            rtol=0)

    log = run_tool(
        'tools/test.py', cfg, ckpt, '--work-dir', 'test',
        cwd=str(tmp_path)).ok(4000)
    assert 'mIoU' in log
