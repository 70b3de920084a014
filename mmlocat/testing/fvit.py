"""Tiny F-ViT detectors for tests: config, text embeddings, batch, build.

Shared by the detection tests and the backbone tests that run a tower
inside F-ViT (CPU, a few ms per step). Needs mmdet.
"""
from typing import Optional, Sequence

import numpy as np
import torch

from mmlocat.datasets.text_embeddings import save_text_embeddings

__all__ = [
    'EMBED', 'TINY_ARCH', 'write_embeddings', 'tiny_fvit_cfg',
    'build_detector', 'det_batch'
]

EMBED = 16  # text / CLIP joint width of the tiny model
TINY_ARCH = dict(
    embed_dims=32,
    num_layers=4,
    num_heads=2,
    feedforward_channels=64,
    output_dims=EMBED)


def write_embeddings(path, names, seed=0, background=True) -> str:
    """Random unit-free text embeddings of ``names`` (+ background) in the
    real ``.npy`` + names format F-ViT's head reads."""
    rng = np.random.RandomState(seed)
    rows = list(names) + (['background'] if background else [])
    save_text_embeddings(
        str(path),
        rng.randn(len(rows), EMBED).astype(np.float32), rows)
    return str(path)


def _assigner(pos: float, neg: float, min_pos: float, **kwargs) -> dict:
    return dict(
        type='MaxIoUAssigner',
        pos_iou_thr=pos,
        neg_iou_thr=neg,
        min_pos_iou=min_pos,
        ignore_iof_thr=-1,
        **kwargs)


def _sampler(pos_fraction: float, **kwargs) -> dict:
    return dict(
        type='RandomSampler',
        num=64,
        pos_fraction=pos_fraction,
        neg_pos_ub=-1,
        **kwargs)


def _rpn_nms(max_per_img: int) -> dict:
    return dict(
        nms_pre=200,
        max_per_img=max_per_img,
        nms=dict(type='nms', iou_threshold=0.7),
        min_bbox_size=0)


def tiny_fvit_cfg(emb_file: str,
                  class_names: Sequence[str],
                  base_class_names: Optional[Sequence[str]] = None,
                  train_class_names: Optional[Sequence[str]] = None,
                  with_mask: bool = False) -> dict:
    """A tiny F-ViT model config (CLIPViT tower, 64 px inputs)."""
    norm = dict(type='BN', requires_grad=True)
    roi_head = dict(
        type='mmlocat.FViTRoIHead',
        bbox_roi_extractor=dict(
            type='SingleRoIExtractor',
            roi_layer=dict(type='RoIAlign', output_size=7, sampling_ratio=0),
            out_channels=16,
            featmap_strides=[4, 8, 16, 32]),
        bbox_head=dict(
            type='mmlocat.CosineSimBBoxHead',
            text_embeddings=emb_file,
            class_names=list(class_names),
            base_class_names=base_class_names,
            bg_class_weight=0.6,
            in_channels=16,
            conv_out_channels=16,
            fc_out_channels=EMBED,
            roi_feat_size=7,
            norm_cfg=norm,
            bbox_coder=dict(
                type='DeltaXYWHBBoxCoder',
                target_means=[0.0] * 4,
                target_stds=[0.1, 0.1, 0.2, 0.2]),
            loss_bbox=dict(type='L1Loss', loss_weight=1.0)),
        vlm_roi_extractor=dict(
            type='SingleRoIExtractor',
            roi_layer=dict(type='RoIAlign', output_size=1, sampling_ratio=0),
            out_channels=EMBED,
            featmap_strides=[16]))
    if with_mask:
        roi_head.update(
            mask_roi_extractor=dict(
                type='SingleRoIExtractor',
                roi_layer=dict(
                    type='RoIAlign', output_size=14, sampling_ratio=0),
                out_channels=16,
                featmap_strides=[4, 8, 16, 32]),
            mask_head=dict(
                type='FCNMaskHead',
                num_convs=4,
                in_channels=16,
                conv_out_channels=16,
                num_classes=len(class_names),
                class_agnostic=True,
                loss_mask=dict(
                    type='CrossEntropyLoss', use_mask=True, loss_weight=1.0)))
    return dict(
        type='mmlocat.FViT',
        train_class_names=train_class_names,
        data_preprocessor=dict(
            type='DetDataPreprocessor',
            mean=[122.771, 116.746, 104.094],
            std=[68.501, 66.632, 70.323],
            bgr_to_rgb=True,
            pad_size_divisor=32),
        backbone=dict(
            type='mmlocat.CLIPViT',
            arch=TINY_ARCH,
            patch_size=16,
            img_size=64,
            out_type='featmap',
            out_indices=(0, 1, 2, 3),
            frozen=True),
        neck=[
            dict(
                type='mmlocat.PatchScoreNeck',
                in_channels=32,
                scales=(4, 2, 1, 0.5),
                modulate=False,
                global_pool='gap',
                norm_cfg=norm),
            dict(
                type='FPN',
                in_channels=[32, 32, 32, 32],
                out_channels=16,
                num_outs=5,
                norm_cfg=norm),
        ],
        rpn_head=dict(
            type='RPNHead',
            in_channels=16,
            feat_channels=16,
            num_convs=2,
            anchor_generator=dict(
                type='AnchorGenerator',
                scales=[8],
                ratios=[0.5, 1.0, 2.0],
                strides=[4, 8, 16, 32, 64]),
            bbox_coder=dict(
                type='DeltaXYWHBBoxCoder',
                target_means=[0.0] * 4,
                target_stds=[1.0] * 4),
            loss_cls=dict(
                type='CrossEntropyLoss', use_sigmoid=True, loss_weight=1.0),
            loss_bbox=dict(type='L1Loss', loss_weight=1.0)),
        roi_head=roi_head,
        train_cfg=dict(
            rpn=dict(
                assigner=_assigner(0.7, 0.3, 0.3, match_low_quality=True),
                sampler=_sampler(0.5, add_gt_as_proposals=False),
                allowed_border=-1,
                pos_weight=-1,
                debug=False),
            rpn_proposal=_rpn_nms(max_per_img=100),
            rcnn=dict(
                assigner=_assigner(0.5, 0.5, 0.5, match_low_quality=False),
                sampler=_sampler(0.25, add_gt_as_proposals=True),
                mask_size=28,
                pos_weight=-1,
                debug=False)),
        test_cfg=dict(
            rpn=_rpn_nms(max_per_img=50),
            rcnn=dict(
                score_thr=0.0,
                nms=dict(type='nms', iou_threshold=0.5),
                max_per_img=20,
                mask_thr_binary=0.5)))


def build_detector(cfg: dict):
    """Build ``cfg`` in mmdet's scope (seed 0) and initialise it."""
    from mmdet.registry import MODELS
    from mmdet.utils import register_all_modules
    from mmengine.config import ConfigDict
    from mmengine.registry import DefaultScope
    register_all_modules(init_default_scope=False)
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope('mmdet'):
        model = MODELS.build(ConfigDict(cfg))
    model.init_weights()
    return model


def det_batch(model, labels: Sequence[int] = (1, 0)) -> dict:
    """A preprocessed batch of 64 px images, one box (and mask) each."""
    from mmdet.structures import DetDataSample
    from mmdet.structures.mask import BitmapMasks
    from mmengine.structures import InstanceData
    samples = []
    for label in labels:
        sample = DetDataSample(
            metainfo=dict(
                img_shape=(64, 64),
                ori_shape=(64, 64),
                scale_factor=(1.0, 1.0)))
        mask = np.zeros((1, 64, 64), np.uint8)
        mask[0, 4:40, 8:44] = 1
        sample.gt_instances = InstanceData(
            bboxes=torch.tensor([[8.0, 4.0, 44.0, 40.0]]),
            labels=torch.tensor([label]),
            masks=BitmapMasks(mask, 64, 64))
        samples.append(sample)
    gen = torch.Generator().manual_seed(0)
    imgs = [
        torch.randint(0, 255, (3, 64, 64), generator=gen, dtype=torch.uint8)
        for _ in labels
    ]
    return model.data_preprocessor(
        dict(inputs=imgs, data_samples=samples), True)
