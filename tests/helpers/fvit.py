"""Tiny F-ViT detectors for tests: config, text embeddings, batch, build.

Shared by the detection tests and the backbone tests that run a tower
inside F-ViT (CPU, a few ms per step). Needs mmdet.

The config is derived from the shipped configs, not retyped: the model is
``configs/ovd/_base_/fvit_clip-b16.py`` (with the mask branch of
``configs/ovd/fvit_clip-b16_ov-lvis.py`` for ``with_mask``), and only the
tiny bits below change: widths, the input size, proposal / sample counts and
test thresholds for an untrained model, BN instead of SyncBN (one CPU
process) and no pre-trained weights. The configs are read from the checkout
the tests run in (``<repo>/configs``); this is why the builder lives under
``tests/`` and not in the installed package.
"""
import copy
import os.path as osp
from typing import Optional, Sequence

import numpy as np
import torch
from helpers.harness import shipped_config
from mmengine.config import Config

from mmlocat.text import save_text_embeddings

__all__ = [
    'EMBED', 'TINY_ARCH', 'write_embeddings', 'tiny_fvit_cfg',
    'build_detector', 'det_batch', 'shipped_config_path'
]

# tests/helpers/fvit.py -> the repository root of the checkout.
REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
SHIPPED_MODEL = 'ovd/_base_/fvit_clip-b16.py'
SHIPPED_MASK = 'ovd/fvit_clip-b16_ov-lvis.py'

EMBED = 16  # text / CLIP joint width of the tiny model
WIDTH = 32  # tower width
CHANNELS = 16  # FPN / RoI width
TINY_ARCH = dict(
    embed_dims=WIDTH,
    num_layers=4,
    num_heads=2,
    feedforward_channels=64,
    output_dims=EMBED)
NORM = dict(type='BN', requires_grad=True)
# Dotted keys (mmengine's merge_from_dict) into the shipped model.
TINY = {
    'backbone.arch': dict(TINY_ARCH, _delete_=True),  # replaces 'b'
    'backbone.img_size': 64,
    'backbone.out_indices': (0, 1, 2, 3),
    'backbone.init_cfg': None,
    'neck.0.in_channels': WIDTH,
    'neck.0.norm_cfg': NORM,
    'neck.1.in_channels': [WIDTH] * 4,
    'neck.1.out_channels': CHANNELS,
    'neck.1.norm_cfg': NORM,
    'rpn_head.in_channels': CHANNELS,
    'rpn_head.feat_channels': CHANNELS,
    'roi_head.bbox_roi_extractor.out_channels': CHANNELS,
    'roi_head.bbox_head.in_channels': CHANNELS,
    'roi_head.bbox_head.conv_out_channels': CHANNELS,
    'roi_head.bbox_head.fc_out_channels': EMBED,
    'roi_head.bbox_head.norm_cfg': NORM,
    'roi_head.vlm_roi_extractor.out_channels': EMBED,
    'train_cfg.rpn.sampler.num': 64,
    'train_cfg.rpn_proposal.nms_pre': 200,
    'train_cfg.rpn_proposal.max_per_img': 100,
    'train_cfg.rcnn.sampler.num': 64,
    'train_cfg.rcnn.mask_size': 28,
    'test_cfg.rpn.nms_pre': 200,
    'test_cfg.rpn.max_per_img': 50,
    'test_cfg.rcnn.score_thr': 0.0,
    'test_cfg.rcnn.nms.iou_threshold': 0.5,
    'test_cfg.rcnn.max_per_img': 20,
    'test_cfg.rcnn.mask_thr_binary': 0.5,
}
TINY_MASK = {
    'roi_head.mask_roi_extractor.out_channels': CHANNELS,
    'roi_head.mask_head.in_channels': CHANNELS,
    'roi_head.mask_head.conv_out_channels': CHANNELS,
    'roi_head.mask_head.norm_cfg': NORM,
}


def shipped_config_path(name: str, repo: str = REPO) -> str:
    """Path of the shipped config ``configs/<name>`` in the checkout.

    Raises:
        FileNotFoundError: If ``<repo>/configs/<name>`` does not exist.
    """
    path = osp.join(repo, 'configs', name)
    if not osp.isfile(path):
        raise FileNotFoundError(
            f'tests/helpers/fvit.py needs the shipped config {path}: run '
            'the tests from a source checkout of mmlocat')
    return path


def _shipped(name: str) -> dict:
    return shipped_config(shipped_config_path(name)).model.to_dict()


def write_embeddings(path,
                     names: Sequence[str],
                     seed: int = 0,
                     background: bool = True) -> str:
    """Random unit-free text embeddings of ``names`` (+ background) in the
    real ``.npy`` + names format F-ViT's head reads."""
    rng = np.random.RandomState(seed)
    rows = list(names) + (['background'] if background else [])
    save_text_embeddings(
        str(path),
        rng.randn(len(rows), EMBED).astype(np.float32), rows)
    return str(path)


def tiny_fvit_cfg(emb_file: str,
                  class_names: Sequence[str],
                  base_class_names: Optional[Sequence[str]] = None,
                  train_class_names: Optional[Sequence[str]] = None,
                  with_mask: bool = False) -> dict:
    """The shipped F-ViT model at tiny size (CLIPViT tower, 64 px inputs),
    as a plain dict."""
    cfg = Config(dict(model=copy.deepcopy(_shipped(SHIPPED_MODEL))))
    overrides = dict(TINY)
    if with_mask:
        roi_head = _shipped(SHIPPED_MASK)['roi_head']
        for key in ('mask_roi_extractor', 'mask_head'):
            cfg.model.roi_head[key] = copy.deepcopy(roi_head[key])
        overrides.update(TINY_MASK)
        overrides['roi_head.mask_head.num_classes'] = len(class_names)
    overrides.update({
        'train_class_names': train_class_names,
        'roi_head.bbox_head.text_embeddings': emb_file,
        'roi_head.bbox_head.class_names': list(class_names),
        'roi_head.bbox_head.base_class_names': base_class_names,
        'roi_head.bbox_head.bg_class_weight': 0.6,
    })
    cfg.merge_from_dict({f'model.{k}': v for k, v in overrides.items()})
    return cfg.model.to_dict()


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
