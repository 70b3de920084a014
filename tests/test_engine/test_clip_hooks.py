"""LogitScaleClampHook and RecordHook (the CLIP records) in a real mmengine
Runner.

A tiny CLIPContrastive starts from an open_clip checkpoint whose
logit_scale is above the clamp (log 150): open_clip uses it for the first
step and clamps the parameter to log 100 after it, and so must the run;
the saved checkpoints carry the towers' CLIP records.
"""
import logging
import math
import warnings

import open_clip
import pytest
import torch
from helpers.tiny_archs import tiny_open_clip_cfg, tiny_vit
from mmengine.logging import MMLogger
from mmengine.runner import Runner

import mmlocat  # noqa: F401
from mmlocat.testing import generate
from mmlocat.utils.records import file_sha256, text_sha256

EMBED = 16
MODEL_CFG = tiny_open_clip_cfg(embed_dim=EMBED, text_layers=1)


def _runner(tmp_path, weights, paths, iters=3):
    pipeline = [
        dict(type='LoadImageFromFile'),
        dict(type='Resize', scale=(32, 32)),
        dict(type='mmlocat.TokenizeCaption', model_name='ViT-B-16'),
        dict(type='PackInputs', algorithm_keys=['text_tokens'])
    ]
    return Runner(
        model=dict(
            type='mmlocat.CLIPContrastive',
            image_encoder=dict(
                type='mmlocat.CLIPViT',
                arch=tiny_vit(num_layers=1, output_dims=EMBED),
                img_size=32,
                patch_size=8,
                act='gelu'),
            text_encoder=dict(model_cfg=MODEL_CFG, weights=weights)),
        work_dir=str(tmp_path / 'work'),
        train_dataloader=dict(
            batch_size=4,
            num_workers=0,
            sampler=dict(type='InfiniteSampler', shuffle=False),
            dataset=dict(
                type='mmlocat.CocoCaptionDataset',
                data_root=paths['data_root'],
                ann_file=paths['train_ann_file'],
                data_prefix=dict(img_path=paths['train_prefix']),
                pipeline=pipeline)),
        optim_wrapper=dict(optimizer=dict(type='AdamW', lr=1e-6)),
        train_cfg=dict(by_epoch=False, max_iters=iters),
        default_hooks=dict(
            checkpoint=dict(
                type='CheckpointHook', by_epoch=False, interval=iters),
            logger=dict(type='LoggerHook', interval=1)),
        custom_hooks=[
            dict(type='mmlocat.LogitScaleClampHook'),
            dict(type='mmlocat.RecordHook')
        ],
        default_scope='mmpretrain',
        randomness=dict(seed=0))


def test_scale_from_the_checkpoint_clamped_after_each_step(tmp_path):
    paths = generate('captions', str(tmp_path / 'data'), 8, 2, (32, 32))
    torch.manual_seed(0)
    ref = open_clip.CLIP(**MODEL_CFG)
    with torch.no_grad():
        ref.logit_scale.fill_(math.log(150.))
    weights = str(tmp_path / 'clip.pt')
    torch.save(ref.state_dict(), weights)
    runner = _runner(tmp_path, weights, paths)
    seen = []

    def record(module, args):  # the scale each forward uses
        seen.append(float(module.logit_scale.detach().exp()))

    runner.model.register_forward_pre_hook(record)
    logger = MMLogger.get_current_instance()
    messages = []
    handler = logging.Handler()
    handler.emit = lambda r: messages.append(r.getMessage())
    logger.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            runner.train()
    finally:
        logger.removeHandler(handler)
    # the logged scale is read without torch's requires_grad warning
    assert not [w for w in caught if 'requires_grad' in str(w.message)], [
        str(w.message) for w in caught
    ]
    line, = [m for m in messages if 'logit scale at iteration' in m]
    assert line.startswith('logit scale at iteration 0: 150.0000 ')
    assert f'pretrained, {weights}' in line
    # step 1 at 150 (open_clip: clamped only after the step), then at the
    # clamp (lr 1e-6 cannot bring 150 down to 100 by itself) and never
    # above it
    top = float(torch.tensor(math.log(100.)))
    assert seen[0] == pytest.approx(150., rel=1e-6)
    assert seen[1] == pytest.approx(100., rel=1e-7)
    assert len(seen) == 3 and max(seen[1:]) <= 100. * (1 + 1e-7)
    assert float(runner.model.logit_scale) <= top
    ckpt = torch.load(
        str(tmp_path / 'work' / 'iter_3.pth'),
        map_location='cpu',
        weights_only=False)
    # the text tower the run trains against, by file and by content
    assert ckpt['meta']['clip_provenance'] == dict(
        text=dict(
            weights='clip.pt',
            sha256=file_sha256(weights),
            text_sha256=text_sha256(ref.state_dict()),
            text_act='gelu'),
        image={})
    assert float(ckpt['state_dict']['logit_scale']) == float(
        runner.model.logit_scale)


def test_hooks_need_a_contrastive_model(tmp_path):
    from mmlocat.engine.hooks import LogitScaleClampHook, RecordHook
    runner = Runner(
        model=dict(
            type='mmpretrain.ImageClassifier',
            backbone=dict(type='mmpretrain.ResNet', depth=18)),
        work_dir=str(tmp_path),
        default_scope='mmpretrain')
    with pytest.raises(TypeError, match='needs a CLIPContrastive model'):
        LogitScaleClampHook().after_train_iter(runner, 0)
    # the one record hook (formerly CLIPProvenanceHook, which raised here)
    # writes a model's records and no CLIP record for a model without one
    checkpoint = {}
    RecordHook().before_save_checkpoint(runner, checkpoint)
    assert checkpoint['meta'] == dict(records_version=2)
