"""Every configs/ovd config loads; twins differ only in weights."""
import glob
import os.path as osp

import pytest
from _cfg_diff import diff, flat
from checkpoint_makers import load_config

from mmlocat.datasets.ov_coco import (OV_COCO_BASE_CLASSES, OV_COCO_CLASSES,
                                      OV_COCO_NOVEL_CLASSES)

PAIRS = [('fvit_clip-b16_ov-coco', 'fvit_last-b16_ov-coco'),
         ('fvit_clip-l14_ov-coco', 'fvit_last-l14_ov-coco'),
         ('fvit_clip-b16_ov-lvis', 'fvit_last-b16_ov-lvis'),
         ('fvit_clip-l14_ov-lvis', 'fvit_last-l14_ov-lvis'),
         ('fvit_eva02-clip-b16_ov-coco', 'fvit_last-eva02-clip-b16_ov-coco'),
         ('fvit_eva02-clip-l14-336_ov-coco',
          'fvit_last-eva02-clip-l14-336_ov-coco'),
         ('fvit_eva02-clip-b16_ov-lvis', 'fvit_last-eva02-clip-b16_ov-lvis'),
         ('fvit_eva02-clip-l14-336_ov-lvis',
          'fvit_last-eva02-clip-l14-336_ov-lvis')]
# the same-recipe CLS twins of the LaSt towers (configs/last/clip_cls-*)
CLS_PAIRS = [(last, last.replace('fvit_last-', 'fvit_cls-'))
             for _, last in PAIRS]
IMAGENET_MEAN, IMAGENET_STD = [123.675, 116.28,
                               103.53], [58.395, 57.12, 57.375]
CLIP_MEAN, CLIP_STD = [122.771, 116.746, 104.094], [68.501, 66.632, 70.323]


def _load(repo_root, name):
    return load_config(osp.join(repo_root, 'configs/ovd', name + '.py'))


def test_all_configs_load(repo_root):
    files = sorted(glob.glob(osp.join(repo_root, 'configs/ovd/*.py')))
    assert len(files) == 25
    for path in files:
        cfg = load_config(path)
        assert cfg.default_scope == 'mmdet'
        assert cfg.custom_imports.imports == ['mmlocat']
        assert cfg.model.type == 'mmlocat.FViT'
        assert cfg.auto_scale_lr.base_batch_size == 64
        opt = cfg.optim_wrapper
        assert opt.type == 'AmpOptimWrapper'
        assert opt.optimizer.type == 'AdamW' and opt.optimizer.lr == 1e-4
        assert opt.optimizer.weight_decay == 0.1
        assert opt.clip_grad.max_norm == 1.0


@pytest.mark.parametrize('plain, last', PAIRS)
def test_twins_differ_only_in_checkpoint(repo_root, plain, last):
    changed = diff(
        _load(repo_root, plain).to_dict(),
        _load(repo_root, last).to_dict())
    assert set(changed) == {'model.backbone.init_cfg.checkpoint.'}
    assert 'last' in changed['model.backbone.init_cfg.checkpoint.'][1]


@pytest.mark.parametrize('last, cls', CLS_PAIRS)
def test_cls_twins_differ_only_in_checkpoint(repo_root, last, cls):
    changed = diff(
        _load(repo_root, last).to_dict(),
        _load(repo_root, cls).to_dict())
    key = 'model.backbone.init_cfg.checkpoint.'
    assert set(changed) == {key}
    assert changed[key][1] == changed[key][0].replace('checkpoints/last-',
                                                      'checkpoints/cls-')


def test_ov_coco_settings(repo_root):
    for name, size, taps, fc in (
        ('fvit_clip-b16_ov-coco', 640, (3, 5, 7, 11), 512),
        ('fvit_clip-l14_ov-coco', 896, (6, 10, 14, 23), 768),
        ('fvit_eva02-clip-b16_ov-coco', 640, (3, 5, 7, 11), 512),
        ('fvit_eva02-clip-l14-336_ov-coco', 896, (6, 10, 14, 23), 768),
    ):
        cfg = _load(repo_root, name)
        head = cfg.model.roi_head.bbox_head
        val = cfg.val_dataloader.dataset.metainfo
        assert tuple(head.class_names) == tuple(val.classes) == \
            OV_COCO_CLASSES
        assert tuple(val.novel_classes) == OV_COCO_NOVEL_CLASSES
        assert tuple(head.base_class_names) == OV_COCO_BASE_CLASSES
        assert tuple(cfg.model.train_class_names) == tuple(
            cfg.train_dataloader.dataset.metainfo.classes)
        assert (head.bg_class_weight, head.vlm_temperature, head.alpha,
                head.beta, head.temperature) == (0.6, 75.0, 0.1, 0.8, 50.0)
        assert head.bbox_coder.target_stds == [0.1, 0.1, 0.2, 0.2]
        assert head.reg_class_agnostic and head.fc_out_channels == fc
        assert tuple(cfg.model.backbone.out_indices) == taps
        assert cfg.model.backbone.frozen
        assert cfg.model.rpn_head.num_convs == 2
        assert cfg.train_dataloader.dataset.pipeline[2].scale == (size, size)
        assert cfg.train_dataloader.dataset.pipeline[2].ratio_range == (0.1,
                                                                        2.0)
        assert cfg.train_cfg.max_epochs == 3
        assert cfg.val_evaluator.type == 'OVCocoMetric'
        assert cfg.param_scheduler[0].end == 250


def test_ov_lvis_settings(repo_root):
    for name, size, beta, fc in (
        ('fvit_clip-b16_ov-lvis', 1024, 0.6, 512),
        ('fvit_clip-l14_ov-lvis', 896, 0.4, 768),
        ('fvit_eva02-clip-b16_ov-lvis', 1024, 0.6, 512),
        ('fvit_eva02-clip-l14-336_ov-lvis', 896, 0.4, 768),
    ):
        cfg = _load(repo_root, name)
        head = cfg.model.roi_head.bbox_head
        # The names come from the embedding sidecar (the annotation file's
        # spelling), not from mmdet's LVISV1Dataset list.
        assert 'class_names' not in head
        assert (head.vlm_temperature, head.beta) == (50.0, beta)
        assert head.fc_out_channels == fc
        mask = cfg.model.roi_head.mask_head
        assert mask.class_agnostic and mask.num_convs == 4
        assert cfg.model.test_cfg.rcnn.max_per_img == 300
        assert cfg.model.test_cfg.rcnn.score_thr == 1e-4
        assert cfg.train_cfg.max_epochs == 48
        assert cfg.param_scheduler[1].milestones == [32, 44]
        assert cfg.train_dataloader.dataset.pipeline[2].scale == (size, size)
        assert cfg.val_evaluator.type == 'mmlocat.NumpyCompatLVISMetric'


def test_locat_config(repo_root):
    cfg = _load(repo_root, 'fvit_locat-b16_ov-coco')
    assert cfg.model.backbone.type == 'mmlocat.LocAtViT'
    assert cfg.model.vlm_fusion is False
    assert cfg.model.last_tap == 'block'
    assert cfg.model.roi_head.vlm_roi_extractor is None


@pytest.mark.parametrize('name, arch, img, patch, width, out', [
    ('fvit_eva02-clip-b16_ov-coco', 'b', 224, 16, 768, 512),
    ('fvit_eva02-clip-l14-336_ov-coco', 'l', 336, 14, 1024, 768),
    ('fvit_eva02-clip-b16_ov-lvis', 'b', 224, 16, 768, 512),
    ('fvit_eva02-clip-l14-336_ov-lvis', 'l', 336, 14, 1024, 768),
])
def test_eva02_clip_configs(repo_root, name, arch, img, patch, width, out):
    import torch

    import mmlocat  # noqa: F401
    from mmlocat.registry import MODELS
    cfg = _load(repo_root, name)
    backbone = cfg.model.backbone
    assert backbone.type == 'mmlocat.EVA02CLIPViT'
    assert (backbone.arch, backbone.img_size,
            backbone.patch_size) == (arch, img, patch)
    assert backbone.frozen and backbone.out_type == 'featmap'
    assert 'eva02' in backbone.init_cfg.checkpoint
    assert 'eva02' in cfg.model.roi_head.bbox_head.text_embeddings
    # Channel sizes downstream agree with the tower (built on meta: free).
    built = dict(backbone)
    built.pop('init_cfg')
    with torch.device('meta'):
        model = MODELS.build(built)
    assert model.embed_dims == width and model.output_dims == out
    assert cfg.model.neck[0].in_channels == width
    assert cfg.model.roi_head.vlm_roi_extractor.out_channels == out
    assert cfg.model.roi_head.vlm_roi_extractor.featmap_strides == [patch]
    # (e) F-ViT normalises EVA02-CLIP inputs with ImageNet's mean / std.
    assert cfg.model.data_preprocessor.mean == IMAGENET_MEAN
    assert cfg.model.data_preprocessor.std == IMAGENET_STD


def _fvit_configs(repo_root):
    files = sorted(glob.glob(osp.join(repo_root, 'configs/ovd/fvit_*.py')))
    names = [osp.basename(f)[:-3] for f in files]
    return [(n, _load(repo_root, n)) for n in names if 'locat' not in n]


def test_fvit_deviations_follow_fvit_by_default(repo_root):
    """(a)-(h) of issue 12 and (i) the LVIS RPN norm: every F-ViT config
    matches CLIPSelf's F-ViT (F-ViT/configs/ov_*/*_eva_original.py)."""
    for name, cfg in _fvit_configs(repo_root):
        model = cfg.model
        head = model.roi_head.bbox_head
        lvis = 'lvis' in name
        size = (1024 if lvis else 640) if 'b16' in name else 896
        # (a) value-path tap without the final norm
        assert model.last_tap == 'value_path', name
        # (b) one FC per branch, cosine on the ReLU'd cls FC
        assert (head.num_cls_fcs, head.num_reg_fcs,
                head.cls_embed) == (1, 1, 'relu_fc'), name
        # (c) the fixed text embedding of "background"
        assert head.background == 'text', name
        # (e) CLIP mean / std for OpenAI towers, ImageNet for EVA02-CLIP
        pre = model.data_preprocessor
        mean, std = ((IMAGENET_MEAN, IMAGENET_STD) if 'eva02' in name else
                     (CLIP_MEAN, CLIP_STD))
        assert (pre.mean, pre.std) == (mean, std), name
        # (f) fixed-size training pad, square test pad (after normalising)
        assert pre.type == 'mmlocat.SquarePadDetDataPreprocessor'
        assert pre.test_pad_to_square is True
        [fixed] = pre.batch_augments
        assert fixed.type == 'BatchFixedSizePad', name
        assert tuple(fixed.size) == (size, size), name
        assert fixed.get('pad_mask', False) == lvis
        # (g) RPN test nms_pre; LVIS assigner / NMS / background weight
        assert model.test_cfg.rpn.nms_pre == 2000
        rcnn_assigner = model.train_cfg.rcnn.assigner
        assert rcnn_assigner.match_low_quality is lvis, name
        assert model.test_cfg.rcnn.nms.iou_threshold == (0.5 if lvis else 0.4)
        assert head.bg_class_weight == (0.9 if lvis else 0.6)
        # the one numeric difference left: fp32 testing (F-ViT: fp16)
        assert model.test_cfg.autocast is None, name
        # (h) decay on every parameter, static loss scale, auto_scale_lr
        assert 'paramwise_cfg' not in cfg.optim_wrapper, name
        assert cfg.optim_wrapper.loss_scale == 512.0
        assert cfg.auto_scale_lr.enable is True
        # (i) OV-LVIS: a norm after each of the RPN's two shared convs
        rpn = model.rpn_head
        if lvis:
            assert rpn.type == 'mmlocat.NormRPNHead', name
            assert rpn.norm_cfg == dict(type='SyncBN', requires_grad=True)
        else:
            assert rpn.type == 'RPNHead' and 'norm_cfg' not in rpn, name
        # the training data's label space is checked before iteration 1
        assert dict(type='mmlocat.OVLabelSpaceHook') in cfg.custom_hooks


def _l14_edits(data):
    """Everything fvit_clip-l14_ov-{data} changes on its B/16 config."""
    size = [896, 896]
    emb = ('data/coco/embeddings/ov-coco_clip-vit-l14.npy' if data == 'coco'
           else 'data/lvis_v1/embeddings/lvis-v1_clip-vit-l14.npy')
    strides = [3.5, 7, 14, 28]
    roi_head = dict(
        bbox_roi_extractor=dict(featmap_strides=strides),
        bbox_head=dict(fc_out_channels=768, text_embeddings=emb),
        vlm_roi_extractor=dict(out_channels=768, featmap_strides=[14]))
    if data == 'lvis':
        roi_head['mask_roi_extractor'] = dict(featmap_strides=strides)
        roi_head['bbox_head'].update(
            base_class_names='data/lvis_v1/embeddings/'
            'lvis-v1_clip-vit-l14.base.json',
            beta=0.4)
    train_pipeline = [{}, {}, dict(scale=size), dict(crop_size=size)]
    test_pipeline = [{}, dict(scale=size)]
    edits = dict(
        image_size=size,
        model=dict(
            data_preprocessor=dict(batch_augments=[dict(size=size)]),
            backbone=dict(
                arch='l',
                patch_size=14,
                out_indices=[6, 10, 14, 23],
                init_cfg=dict(
                    checkpoint='checkpoints/clip-vit-l14_mmlocat.pth')),
            neck=[dict(in_channels=1024),
                  dict(in_channels=[1024] * 4)],
            rpn_head=dict(anchor_generator=dict(strides=strides + [56])),
            roi_head=roi_head),
        train_pipeline=train_pipeline,
        test_pipeline=test_pipeline,
        train_dataloader=dict(dataset=dict(pipeline=train_pipeline)),
        val_dataloader=dict(dataset=dict(pipeline=test_pipeline)),
        test_dataloader=dict(dataset=dict(pipeline=test_pipeline)))
    return flat(edits)


@pytest.mark.parametrize('data', ['coco', 'lvis'])
def test_l14_configs_edit_only_the_tower_and_sizes(repo_root, data):
    """The L/14 leaves edit their B/16 config in place: the tower, the
    widths and strides it implies, the input size (and, OV-LVIS, F-ViT's
    L/14 novel-class fusion weight) -- nothing else."""
    changed = diff(
        _load(repo_root, f'fvit_clip-b16_ov-{data}').to_dict(),
        _load(repo_root, f'fvit_clip-l14_ov-{data}').to_dict())
    assert {k: new for k, (_, new) in changed.items()} == _l14_edits(data)
