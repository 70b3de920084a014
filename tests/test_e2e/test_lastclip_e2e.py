"""End to end: LaSt-CLIP through tools/train.py, tools/test.py, the
converter and an OV-COCO F-ViT config (issue 14).

A tiny CLIPViT (LazyStrike, K = N/2) and a random-init open_clip text tower
(:mod:`tiny_clip`) train on the generated captioned shapes with retrieval
evaluation, resume bit-identically from a checkpoint, are scored zero-shot
from class embeddings written by the text-embedding library with the
trained text tower, and the converted image tower loads into the shipped
``fvit_last-b16_ov-coco.py`` (tiny).
"""
import os
import os.path as osp
import re
import shutil
import socket
import subprocess
import sys

import numpy as np
import pytest
import torch
from mmengine.config import Config
from tiny_clip import (EMBED, TOWER, write_tiny_clip_config,
                       write_tiny_zero_shot_config)
from tiny_cls import probe_env

from mmlocat.datasets.text_embeddings import (build_class_embeddings,
                                              save_text_embeddings)
from mmlocat.testing import generate
from mmlocat.testing.caption_writer import (CAPTION_BACKGROUNDS,
                                            caption_class_names)

ITERS, EVERY = 90, 45


def _run(args, env, cwd, timeout=300):
    proc = subprocess.run(
        args,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    return out


def _losses(path):
    """(rank, iteration) -> loss."""
    out = {}
    with open(path) as f:
        for line in f:
            rank, step, value = line.split()
            out[int(rank), int(step)] = float.fromhex(value)
    return out


def _metric(out, name):
    values = re.findall(re.escape(name) + r': ([\d.]+)', out)
    assert values, f'{name} not in the log'
    return float(values[-1])


@pytest.fixture(scope='module')
def captions(tmp_path_factory):
    return generate(
        'captions',
        str(tmp_path_factory.mktemp('captions')),
        32,
        8, (32, 32),
        seed=0,
        zeroshot_per_class=4)


@pytest.fixture(scope='module')
def trained(captions, tmp_path_factory, repo_root, subprocess_env):
    tmp = tmp_path_factory.mktemp('lastclip')
    config = write_tiny_clip_config(
        str(tmp / 'tiny.py'),
        repo_root,
        captions,
        iters=ITERS,
        batch_size=16,
        val_interval=EVERY,
        checkpoint_interval=EVERY,
        probe=True,
        lr=1e-3)
    losses = str(tmp / 'ref.txt')
    work = str(tmp / 'ref')
    out = _run([sys.executable, 'tools/train.py', config, '--work-dir', work],
               probe_env(subprocess_env, losses=losses), repo_root)
    return dict(
        config=config, work=work, out=out, losses=_losses(losses), tmp=tmp)


@pytest.mark.timeout(600)
def test_train_learns_and_evaluates_retrieval(trained):
    losses = [trained['losses'][0, i] for i in range(1, ITERS + 1)]
    start, end = np.mean(losses[:3]), np.mean(losses[-5:])
    print(f'loss {start:.3f} -> {end:.3f}')
    assert end < 0.7 * start, (start, end)
    out = trained['out']
    for key in ('i2t_R@1', 'i2t_R@5', 'i2t_R@10', 't2i_R@1', 't2i_R@5',
                't2i_R@10'):
        assert 0 <= _metric(out, f'retrieval/{key}') <= 100
    # 8 val images, 2 captions each: chance i2t R@1 is 1/8
    assert _metric(out, 'retrieval/i2t_R@1') >= 25
    assert osp.isfile(osp.join(trained['work'], f'iter_{ITERS}.pth'))


@pytest.mark.timeout(600)
def test_resume_continues_bit_identically(trained, repo_root, subprocess_env):
    work = str(trained['tmp'] / 'resumed')
    os.makedirs(work)
    ckpt = osp.join(work, f'iter_{EVERY}.pth')
    shutil.copy(osp.join(trained['work'], f'iter_{EVERY}.pth'), ckpt)
    with open(osp.join(work, 'last_checkpoint'), 'w') as f:
        f.write(ckpt)
    losses = str(trained['tmp'] / 'resumed.txt')
    _run([
        sys.executable, 'tools/train.py', trained['config'], '--work-dir',
        work, '--resume'
    ], probe_env(subprocess_env, losses=losses), repo_root)
    resumed = _losses(losses)
    assert sorted(resumed) == [(0, i) for i in range(EVERY + 1, ITERS + 1)]
    for key, value in resumed.items():
        assert value == trained['losses'][key], key


def _class_embeddings(config, checkpoint, path, names=None, templates=None):
    """Class embeddings of the trained text tower, with the library
    function behind tools/misc/dump_text_embeddings.py (the generated
    shapes and their backgrounds unless ``names`` / ``templates``)."""
    from mmengine.runner import load_checkpoint

    from mmlocat.datasets import TokenizeCaption
    from mmlocat.registry import MODELS
    from mmlocat.utils.safe_load import allow_mmengine_checkpoint_globals
    cfg = Config.fromfile(config)
    model = MODELS.build(cfg.model).eval()
    allow_mmengine_checkpoint_globals()
    load_checkpoint(model, checkpoint, map_location='cpu')
    tokenize = TokenizeCaption(model_name='ViT-B-16')

    def encode(prompts):
        tokens = tokenize(dict(captions=prompts))['text_tokens']
        with torch.no_grad():
            return model.encode_text(tokens)

    if templates is None:
        templates = [f'a {{}} on a {bg}' for bg in CAPTION_BACKGROUNDS]
    emb, names = build_class_embeddings(
        names or caption_class_names(),
        encode,
        templates,
        prompt_style='plain')
    return save_text_embeddings(path, emb, names)


@pytest.mark.timeout(600)
def test_zero_shot_top1_through_tools_test(trained, repo_root, subprocess_env):
    ckpt = osp.join(trained['work'], f'iter_{ITERS}.pth')
    emb = _class_embeddings(trained['config'], ckpt,
                            str(trained['tmp'] / 'zs.npy'))
    out = _run([
        sys.executable, 'tools/test.py', trained['config'], ckpt, '--work-dir',
        str(trained['tmp'] / 'test'), '--cfg-options',
        f'test_evaluator.embeddings={emb}'
    ], probe_env(subprocess_env), repo_root)
    top1 = _metric(out, 'zero_shot/top1')
    print(f'zero-shot top-1 {top1:.2f} (chance 6.25)')
    # 16 classes x 4 unseen images; chance is 6.25. Measured 22-25 at 90
    # iterations over 4 random inits (in-process runs of the same recipe).
    assert top1 >= 12.5


FVIT = 'configs/ovd/fvit_last-b16_ov-coco.py'


def _tiny_fvit(backbone_ckpt, emb):
    cfg = Config.fromfile(FVIT)
    cfg.model.backbone.arch = dict(TOWER)
    cfg.merge_from_dict({
        'model.backbone.img_size':
        32,
        'model.backbone.patch_size':
        8,
        'model.backbone.out_indices': (0, 1, 2, 3),
        'model.backbone.init_cfg.checkpoint':
        backbone_ckpt,
        'model.neck': [
            dict(
                type='mmlocat.PatchScoreNeck',
                in_channels=32,
                scales=(4, 2, 1, 0.5),
                modulate=False,
                global_pool='gap',
                norm_cfg=dict(type='BN')),
            dict(
                type='FPN',
                in_channels=[32] * 4,
                out_channels=16,
                num_outs=5,
                norm_cfg=dict(type='BN')),
        ],
        'model.rpn_head.in_channels':
        16,
        'model.rpn_head.feat_channels':
        16,
        'model.roi_head.bbox_roi_extractor.out_channels':
        16,
        'model.roi_head.bbox_head.in_channels':
        16,
        'model.roi_head.bbox_head.conv_out_channels':
        16,
        'model.roi_head.bbox_head.fc_out_channels':
        EMBED,
        'model.roi_head.bbox_head.norm_cfg':
        dict(type='BN'),
        'model.roi_head.bbox_head.text_embeddings':
        emb,
        'model.roi_head.vlm_roi_extractor.out_channels':
        EMBED,
    })
    return cfg


@pytest.fixture(scope='module')
def converted(trained, repo_root, subprocess_env):
    """The trained checkpoint and its lastclip2mmlocat conversion."""
    src = osp.join(trained['work'], f'iter_{ITERS}.pth')
    dst = str(trained['tmp'] / 'last-clip-vit-tiny_mmlocat.pth')
    _run([
        sys.executable, 'tools/model_converters/lastclip2mmlocat.py', src, dst
    ], subprocess_env, repo_root)
    return src, dst


def _trained_tower(src):
    """``image_encoder.*`` of the training checkpoint, prefix removed."""
    from mmlocat.utils.safe_load import allow_mmengine_checkpoint_globals
    allow_mmengine_checkpoint_globals()
    state = torch.load(src, map_location='cpu', weights_only=True)
    return {
        k[len('image_encoder.'):]: v
        for k, v in state['state_dict'].items()
        if k.startswith('image_encoder.')
    }


def _assert_bit_equal(loaded, trained_tower):
    assert loaded.keys() == trained_tower.keys()
    for key, value in trained_tower.items():
        torch.testing.assert_close(loaded[key], value, rtol=0, atol=0)


@pytest.mark.timeout(600)
def test_converted_tower_loads_into_ov_coco_fvit(trained, converted):
    from mmdet.registry import MODELS as MMDET_MODELS
    from mmengine.registry import init_default_scope

    from mmlocat.datasets import OV_COCO_CLASSES
    src, dst = converted
    rows = list(OV_COCO_CLASSES) + ['background']
    emb = np.random.RandomState(0).randn(len(rows), EMBED).astype('float32')
    emb_path = save_text_embeddings(str(trained['tmp'] / 'ov.npy'), emb, rows)
    init_default_scope('mmdet')
    detector = MMDET_MODELS.build(_tiny_fvit(dst, emb_path).model)
    detector.init_weights()
    _assert_bit_equal(detector.backbone.state_dict(), _trained_tower(src))
    assert detector.backbone.act == 'gelu'  # recorded by the converter
    # the text tower was trained too: embeddings that claim the original
    # CLIP are refused by F-ViT's provenance check
    claimed = save_text_embeddings(
        str(trained['tmp'] / 'ov_claimed.npy'),
        emb,
        rows,
        text_model=dict(name='ViT-B-16'))
    with pytest.raises(ValueError, match=f'lastclip:iter_{ITERS}.pth'):
        MMDET_MODELS.build(_tiny_fvit(dst, claimed).model)


@pytest.mark.timeout(600)
def test_converted_tower_loads_into_zero_shot_seg(trained, converted, tmp_path,
                                                  repo_root, subprocess_env):
    """The converted file in the shipped zero-shot config's layout: the
    config's ``init_cfg`` loads it bit-equal, and ``tools/test.py`` with it
    as the checkpoint (the README's command) loads every key and scores
    generated VOC20 with class embeddings of the trained text tower."""
    from mmengine.registry import init_default_scope
    from mmseg.registry import MODELS as MMSEG_MODELS

    from mmlocat.datasets.text_embeddings import TEMPLATE_SETS
    from mmlocat.testing.voc_cityscapes_writers import VOC_CLASSES
    src, dst = converted
    emb = _class_embeddings(
        trained['config'],
        src,
        str(tmp_path / 'voc20.npy'),
        names=list(VOC_CLASSES),
        templates=TEMPLATE_SETS['imagenet80'][:4])
    paths = generate('pascal_voc', str(tmp_path / 'voc'), 1, 3, (40, 56))
    config = write_tiny_zero_shot_config(
        str(tmp_path / 'zs.py'), repo_root, dst, emb, paths['data_root'])
    init_default_scope('mmseg')
    segmentor = MMSEG_MODELS.build(Config.fromfile(config).model)
    segmentor.init_weights()
    tower = _trained_tower(src)
    _assert_bit_equal(segmentor.backbone.state_dict(), tower)
    # the act the converter recorded from the training config
    assert segmentor.backbone.act == 'gelu'
    # the shipped act (OpenAI CLIP's QuickGELU) is refused for this tower
    shipped_act = write_tiny_zero_shot_config(
        str(tmp_path / 'zs_quick.py'),
        repo_root,
        dst,
        emb,
        paths['data_root'],
        act='quick_gelu')
    refused = "act='gelu' but this CLIPViT has act='quick_gelu'"
    with pytest.raises(ValueError, match=refused):
        MMSEG_MODELS.build(Config.fromfile(shipped_act).model).init_weights()
    out = _run([
        sys.executable, 'tools/test.py', config, dst, '--work-dir',
        str(tmp_path / 'work')
    ], subprocess_env, repo_root)
    # tools/test.py's strict load report: the whole tower, nothing else
    n = len(tower)
    assert (f'loaded {n} of {n} tensors of {dst} into ZeroShotSegmentor; '
            'missing keys (0)') in out
    assert 0 <= _metric(out, 'mIoU') <= 100
    assert re.search(r'\|\s+aeroplane\s+\|', out)


def _free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


@pytest.mark.timeout(600)
def test_two_gloo_processes_equal_one_at_twice_the_batch(
        captions, tmp_path, repo_root, subprocess_env):
    """2 processes x 4 images with gathered features == 1 process x 8:
    every rank's loss and the weights (``local_loss`` is checked against
    open_clip on 2 processes in tests/test_models/test_losses)."""
    iters, local_loss = 3, False
    runs = {}
    for name, procs, batch in (('single', 1, 8), ('ddp', 2, 4)):
        config = write_tiny_clip_config(
            str(tmp_path / f'{name}.py'),
            repo_root,
            captions,
            iters=iters,
            batch_size=batch,
            shuffle=False,
            local_loss=local_loss,
            probe=True,
            extra=dict(
                optim_wrapper=dict(
                    _delete_=True,
                    type='OptimWrapper',
                    optimizer=dict(type='SGD', lr=0.1, momentum=0.9)),
                val_cfg=None,
                val_dataloader=None,
                val_evaluator=None))
        losses = str(tmp_path / f'{name}.txt')
        env = probe_env(subprocess_env, losses=losses)
        work = str(tmp_path / name)
        if procs == 1:
            cmd = [sys.executable, 'tools/train.py', config]
        else:
            env['PORT'] = str(_free_port())
            cmd = ['bash', 'tools/dist_train.sh', config, str(procs)]
        _run([*cmd, '--work-dir', work], env, repo_root)
        ckpt = torch.load(
            osp.join(work, f'iter_{iters}.pth'), weights_only=False)
        runs[name] = (_losses(losses), ckpt['state_dict'])
    single, single_weights = runs['single']
    ddp, ddp_weights = runs['ddp']
    diffs = []
    for step in range(1, iters + 1):
        ranks = (ddp[0, step], ddp[1, step])
        if local_loss:
            diffs.append(abs(sum(ranks) / 2 - single[0, step]))
        else:
            diffs.extend(abs(r - single[0, step]) for r in ranks)
    print(f'max loss diff {max(diffs):.3g}')
    assert max(diffs) <= 1e-5, diffs
    assert single[0, iters] != single[0, 1]
    for key, value in single_weights.items():
        torch.testing.assert_close(
            ddp_weights[key], value, rtol=0, atol=1e-5, msg=key)
