"""Non-ASCII and space-containing paths through the tools (bad-input
drill): data root, config, work dir, checkpoint, output folders and image
file names with spaces, accents and CJK characters, through
``tools/train.py``, ``tools/test.py``, ``tools/infer.py`` and a model
converter (``locat2mmlocat.py``), each a subprocess as a user runs it."""
import json
import os
import os.path as osp
import pickle
import shutil
import subprocess
import sys

import pytest
import torch
from helpers.shrink import write_tiny_config

from mmlocat.testing import generate

pytestmark = pytest.mark.e2e


def _run(args, repo_root, env):
    proc = subprocess.run(
        [sys.executable] + [str(a) for a in args],
        cwd=repo_root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    return proc.stdout + proc.stderr


@pytest.mark.timeout(900)
@pytest.mark.slow
def test_tools_with_non_ascii_and_space_paths(tmp_path, repo_root,
                                              subprocess_env):
    base = tmp_path / 'dössier ü'
    paths = generate('ade20k', str(base / 'データ dir'), 2, 2, (64, 96))
    root = paths['data_root']
    cfg = write_tiny_config(
        osp.join(repo_root, 'configs/locat/upernet_locat-b_ade20k.py'),
        str(base / 'cónfig ç.py'), root)
    work = base / 'wörk dir'
    _run(['tools/train.py', cfg, '--work-dir', work], repo_root,
         subprocess_env)
    ckpt_dir = base / 'chéckpoints 検査'
    ckpt_dir.mkdir()
    ckpt = ckpt_dir / 'iter 2 ü.pth'
    shutil.copy(work / 'iter_2.pth', ckpt)

    results = base / 'résults ü.pkl'
    log = _run([
        'tools/test.py', cfg, ckpt, '--work-dir', base / 'tëst dir', '--out',
        results
    ], repo_root, subprocess_env)
    assert 'mIoU' in log
    with open(results, 'rb') as f:
        assert len(pickle.load(f)) == 2

    images = base / 'фото dir'
    shutil.copytree(osp.join(root, paths['val_img_dir']), images)
    first = sorted(os.listdir(images))[0]
    os.rename(images / first, images / 'фото ü 1.jpg')
    out = base / 'öut dir'
    log = _run(['tools/infer.py', images, cfg, ckpt, '--out', out], repo_root,
               subprocess_env)
    assert '2 image(s) written' in log
    with open(out / 'фото ü 1.jpg.json', encoding='utf-8') as f:
        record = json.load(f)
    assert record['image'] == str(images / 'фото ü 1.jpg')
    assert osp.isfile(record['label_png']) and osp.isfile(record['png'])

    # a model converter reading and writing such paths
    import timm
    src = base / 'sörc é' / 'vit tiny ü.pth'
    src.parent.mkdir()
    torch.manual_seed(0)
    model = timm.create_model(
        'vit_tiny_patch16_224', pretrained=False, img_size=32)
    torch.save(model.state_dict(), src)
    dst = src.parent / 'locat ü.pth'
    log = _run(['tools/model_converters/locat2mmlocat.py', src, dst],
               repo_root, subprocess_env)
    assert f'wrote 152 tensors to {dst}' in log
    assert torch.load(dst, weights_only=False)['state_dict']
