"""Non-ASCII and space-containing paths through the tools (bad-input
drill): data root, config, work dir, checkpoint, output folders and image
file names with spaces, accents and CJK characters, through
``tools/train.py``, ``tools/test.py``, ``tools/infer.py`` and a model
converter (``locat2mmlocat.py``), each as a user runs it (in-process)."""
import json
import os
import os.path as osp
import pickle
import shutil

import pytest
import torch
from helpers.harness import run_tool
from helpers.shrink import write_tiny_config

from mmlocat.testing import generate

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(900)
@pytest.mark.slow
def test_tools_with_non_ascii_and_space_paths(tmp_path, repo_root):
    base = tmp_path / 'dössier ü'
    paths = generate('ade20k', str(base / 'データ dir'), 2, 2, (64, 96))
    root = paths['data_root']
    cfg = write_tiny_config(
        osp.join(repo_root, 'configs/locat/upernet_locat-b_ade20k.py'),
        str(base / 'cónfig ç.py'), root)
    work = base / 'wörk dir'
    run_tool('tools/train.py', cfg, '--work-dir', work).ok()
    ckpt_dir = base / 'chéckpoints 検査'
    ckpt_dir.mkdir()
    ckpt = ckpt_dir / 'iter 2 ü.pth'
    shutil.copy(work / 'iter_2.pth', ckpt)

    results = base / 'résults ü.pkl'
    log = run_tool('tools/test.py', cfg, ckpt, '--work-dir', base / 'tëst dir',
                   '--out', results).ok()
    assert 'mIoU' in log
    with open(results, 'rb') as f:
        assert len(pickle.load(f)) == 2

    images = base / 'фото dir'
    shutil.copytree(osp.join(root, paths['val_img_dir']), images)
    first = sorted(os.listdir(images))[0]
    os.rename(images / first, images / 'фото ü 1.jpg')
    out = base / 'öut dir'
    log = run_tool('tools/infer.py', images, cfg, ckpt, '--out', out).ok()
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
    log = run_tool('tools/model_converters/locat2mmlocat.py', src, dst).ok()
    assert f'wrote 152 tensors to {dst}' in log
    assert torch.load(dst, weights_only=False)['state_dict']
