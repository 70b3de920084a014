"""End to end: F-ViT through tools/train.py and tools/test.py.

Tiny COCO (OV-COCO split) and LVIS datasets and random text embeddings are
written to tmp_path; the shipped OV-COCO / OV-LVIS configs are derived with
a 4-layer, 32-d CLIP ViT (16-d joint space) at 64 px and run as a user
runs them (in-process: helpers.harness.run_tool).
"""
import glob
import json
import os.path as osp
import pickle
import re

import numpy as np
import pytest
from helpers.fvit import EMBED, write_embeddings
from helpers.harness import run_tool
from helpers.shrink import write_tiny_ovd_config

from mmlocat.testing import generate
from mmlocat.text import names_from_annotations
from mmlocat.utils.records import file_sha256, read_checkpoint_meta

pytestmark = pytest.mark.e2e


def _train_and_test(cfg, work, extra_test=()):
    train_out = run_tool('tools/train.py', cfg, '--work-dir', work).ok()
    losses = [float(x) for x in re.findall(r'\bloss: ([\d.]+)', train_out)]
    assert len(losses) >= 4 and all(np.isfinite(losses))
    ckpt = osp.join(work, 'epoch_2.pth')
    assert osp.isfile(ckpt)
    test_out = run_tool(*['tools/test.py', cfg, ckpt, '--work-dir', work] +
                        list(extra_test)).ok()
    return ckpt, test_out


@pytest.fixture(scope='module')
def coco(tmp_path_factory):
    root = str(tmp_path_factory.mktemp('ovcoco'))
    paths = generate('coco', root, 4, 2, (64, 64), seed=2)
    with open(osp.join(root, paths['ov_val_ann_file'])) as f:
        names, _ = names_from_annotations(json.load(f))
    return paths, names


@pytest.mark.slow
def test_ov_coco_train_test_fusion_and_mismatch(coco, tmp_path, repo_root):
    paths, names = coco
    root = paths['data_root']
    assert len(names) == 65
    emb = write_embeddings(tmp_path / 'coco_emb.npy', names)
    base = osp.join(repo_root, 'configs/ovd/fvit_clip-b16_ov-coco.py')
    val_ann = osp.join(root, paths['ov_val_ann_file'])
    cfg = write_tiny_ovd_config(tmp_path / 'tiny_coco.py', base, root, emb,
                                val_ann)
    work = str(tmp_path / 'work')
    fused_pkl = str(tmp_path / 'fused.pkl')
    ckpt, out = _train_and_test(cfg, work, ['--out', fused_pkl])
    print('\n'.join(re.findall(r'.*coco/novel_ap50.*', out)))
    # OVCocoMetric's novel / base AP50 (random weights: any value in
    # [0, 1], or -1 where a split has no ground truth).
    for key in ('novel_ap50', 'base_ap50', 'bbox_mAP_50'):
        found = re.findall(rf'coco/{key}: (-?[\d.]+)', out)
        assert found, out[-3000:]
        assert -1 <= float(found[-1]) <= 1

    # The same checkpoint without CLIP score fusion scores differently, so
    # the fused path really ran.
    plain_pkl = str(tmp_path / 'plain.pkl')
    run_tool('tools/test.py', cfg, ckpt, '--work-dir', work, '--out',
             plain_pkl, '--cfg-options', 'model.vlm_fusion=False').ok()
    with open(fused_pkl, 'rb') as f:
        fused = pickle.load(f)
    with open(plain_pkl, 'rb') as f:
        plain = pickle.load(f)
    assert len(fused) == len(plain) == 2
    s_fused = np.concatenate(
        [p['pred_instances']['scores'].numpy() for p in fused])
    s_plain = np.concatenate(
        [p['pred_instances']['scores'].numpy() for p in plain])
    assert s_fused.size and s_plain.size
    assert not np.allclose(np.sort(s_fused), np.sort(s_plain))

    # An embedding file with two classes swapped is refused.
    swapped = list(names)
    swapped[4], swapped[5] = swapped[5], swapped[4]
    bad = write_embeddings(tmp_path / 'swapped.npy', swapped)
    bad_cfg = write_tiny_ovd_config(tmp_path / 'bad_coco.py', base, root, bad,
                                    val_ann)
    proc = run_tool('tools/test.py', bad_cfg, ckpt, '--work-dir',
                    str(tmp_path / 'bad_work'))
    code, out = proc.returncode, proc.output
    assert code != 0
    assert 'text embeddings do not match the dataset classes' in out
    assert 'different order' in out

    # Base-only (48-class) training data without the label map is refused
    # before the first iteration, not read as 65-class labels.
    proc = run_tool('tools/train.py', cfg, '--work-dir',
                    str(tmp_path / 'nomap'), '--cfg-options',
                    'model.train_class_names=None')
    code, out = proc.returncode, proc.output
    assert code != 0
    assert re.search(
        r'the training data \S*instances_train2017_seen_2\.json labels 48 '
        r'classes .* expects labels indexing 65 classes', out), out[-3000:]

    # The class files travel with the checkpoint (train.py adds
    # mmlocat.RecordHook): the embedding file regenerated with
    # other values, same names and order, is refused by test.py and
    # infer.py, naming both hashes; --allow-class-file-change runs.
    record = read_checkpoint_meta(ckpt)['class_files']
    role = 'roi_head.bbox_head.text_embeddings'
    assert record[role]['sha256'] == file_sha256(emb)
    assert record[role]['names'] == list(names) + ['background']
    trained_sha = file_sha256(emb)
    write_embeddings(tmp_path / 'coco_emb.npy', names, seed=7)
    image = sorted(glob.glob(osp.join(root, 'val2017', '*.jpg')))[0]
    runs = dict(
        test=['tools/test.py', cfg, ckpt, '--work-dir', work],
        infer=[
            'tools/infer.py', image, cfg, ckpt, '--out',
            str(tmp_path / 'infer')
        ])
    for tool, args in runs.items():
        proc = run_tool(*args)
        code, out = proc.returncode, proc.output
        assert code == 2, out[-3000:]
        assert (f"the class files are not the checkpoint's: {ckpt} records "
                f'{role} {emb} (sha256 {trained_sha}) but the model '
                f'reads {emb} (sha256 {file_sha256(emb)}): the same names in '
                'the same order with other values') in out, out[-3000:]
        out = run_tool(*(args + ['--allow-class-file-change'])).ok()
        assert 'class files changed (--allow-class-file-change)' in out
        if tool == 'test':
            assert re.search(r'coco/novel_ap50: (-?[\d.]+)', out)


def test_ov_lvis_train_test(tmp_path, repo_root):
    root = str(tmp_path / 'lvis')
    paths = generate('lvis', root, 4, 2, (64, 64), seed=0)
    with open(osp.join(root, paths['val_ann_file'])) as f:
        names, base_names = names_from_annotations(json.load(f))
    assert 0 < len(base_names) < len(names) == 12
    emb = write_embeddings(tmp_path / 'lvis_emb.npy', names, seed=1)
    base_file = tmp_path / 'lvis_emb.base.json'
    base_file.write_text(json.dumps(base_names))
    meta = f', metainfo=dict(classes={tuple(names)!r})'
    cfg = write_tiny_ovd_config(
        tmp_path / 'tiny_lvis.py',
        osp.join(repo_root, 'configs/ovd/fvit_clip-b16_ov-lvis.py'),
        root,
        emb,
        osp.join(root, paths['val_ann_file']),
        mask=True,
        head_extra=f', class_names={list(names)!r}, '
        f'base_class_names={str(base_file)!r}',
        roi_extra=', mask_roi_extractor=dict(out_channels=16), '
        'mask_head=dict(in_channels=16, conv_out_channels=16, '
        f'num_classes={len(names)}, norm_cfg=dict(type="BN"))',
        train_meta=meta,
        val_meta=meta)
    _, out = _train_and_test(cfg, str(tmp_path / 'work'))
    print('\n'.join(re.findall(r'.*lvis/segm_APr.*', out)))
    for key in ('segm_APr', 'segm_APc', 'segm_APf', 'bbox_APr'):
        found = re.findall(rf'lvis/{key}: (-?[\d.]+)', out)
        assert found, out[-3000:]
        assert -1 <= float(found[-1]) <= 1


@pytest.mark.slow
def test_clipself_checkpoint_converts_and_tests(coco, tmp_path, repo_root):
    """A CLIPSelf F-ViT release (mmdet 2.x layout, random weights at the
    tiny size) through tools/model_converters/clipself_fvit2mmlocat.py and
    tools/test.py under the shipped EVA02-CLIP config, which loads it
    strictly (a partial checkpoint would be refused)."""
    import torch
    from helpers.clipself_reference import (FViTReference, mmcv_checkpoint,
                                            randomise_)
    paths, names = coco
    root = paths['data_root']
    emb = write_embeddings(tmp_path / 'coco_emb.npy', names)
    base = osp.join(repo_root, 'configs/ovd/fvit_eva02-clip-b16_ov-coco.py')
    val_ann = osp.join(root, paths['ov_val_ann_file'])
    cfg = write_tiny_ovd_config(tmp_path / 'tiny_eva.py', base, root, emb,
                                val_ann)
    rows = np.load(emb)
    ref = FViTReference(
        dict(
            dim=32,
            depth=4,
            heads=2,
            hidden=64,
            out_dim=EMBED,
            patch=16,
            img=64), (0, 1, 2, 3),
        16,
        torch.from_numpy(rows / np.linalg.norm(rows, axis=1, keepdims=True)),
        [True] * len(names),
        rpn_test_cfg=dict(
            nms_pre=200,
            max_per_img=50,
            min_bbox_size=0,
            nms=dict(type='nms', iou_threshold=0.7)),
        rcnn_test_cfg=dict(
            score_thr=0.0,
            max_per_img=20,
            nms=dict(type='nms', iou_threshold=0.4)))
    src = str(tmp_path / 'fvit_eva_vitb16_ovcoco_clipself_patches.pth')
    torch.save(mmcv_checkpoint(randomise_(ref, 5), names), src)
    dst = str(tmp_path / 'fvit_eva_vitb16_ovcoco_mmlocat.pth')
    out = run_tool('tools/model_converters/clipself_fvit2mmlocat.py', src, dst,
                   '--text-embeddings', emb).ok()
    assert 'saved ' in out
    out = run_tool('tools/test.py', cfg, dst, '--work-dir',
                   str(tmp_path / 'work')).ok()
    found = re.findall(r'coco/novel_ap50: (-?[\d.]+)', out)
    assert found and -1 <= float(found[-1]) <= 1, out[-3000:]
    # the F-ViT file itself is not an mmlocat.FViT checkpoint
    proc = run_tool('tools/test.py', cfg, src, '--work-dir',
                    str(tmp_path / 'src_work'))
    code, out = proc.returncode, proc.output
    assert code == 2 and 'refusing to run a partly random network' in out
    assert 'unexpected keys (170): [backbone.interpolate1.0.weight' in out
    # the converted checkpoint records the embedding file it was checked
    # against: the file regenerated with other values is refused
    trained_sha = file_sha256(emb)
    write_embeddings(tmp_path / 'coco_emb.npy', names, seed=9)
    proc = run_tool('tools/test.py', cfg, dst, '--work-dir',
                    str(tmp_path / 'dst_work'))
    code, out = proc.returncode, proc.output
    assert code == 2, out[-3000:]
    assert (f'{dst} records roi_head.bbox_head.text_embeddings {emb} '
            f'(sha256 {trained_sha}) but the model reads {emb} (sha256 '
            f'{file_sha256(emb)})') in out, out[-3000:]
