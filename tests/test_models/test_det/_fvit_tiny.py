"""Tiny F-ViT configs shared by the detection tests (CPU, a few ms).

Derived from the shipped configs, not retyped: the model is
``configs/ovd/_base_/fvit_clip-b16.py`` (with the mask branch of
``configs/ovd/fvit_clip-b16_ov-lvis.py`` for ``with_mask``), and only the
tiny bits below change: widths, the input size, proposal / sample counts and
test thresholds for an untrained model, BN instead of SyncBN (one CPU
process) and no pre-trained weights.
"""
import copy
import functools
import os.path as osp

import numpy as np
from mmengine.config import Config

from mmlocat.datasets.text_embeddings import save_text_embeddings

REPO = osp.dirname(
    osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))
SHIPPED_MODEL = osp.join(REPO, 'configs', 'ovd', '_base_', 'fvit_clip-b16.py')
SHIPPED_MASK = osp.join(REPO, 'configs', 'ovd', 'fvit_clip-b16_ov-lvis.py')

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


@functools.lru_cache()
def _shipped(path: str) -> dict:
    return Config.fromfile(path).model.to_dict()


def write_embeddings(path, names, seed=0, background=True):
    rng = np.random.RandomState(seed)
    rows = list(names) + (['background'] if background else [])
    save_text_embeddings(
        str(path),
        rng.randn(len(rows), EMBED).astype(np.float32), rows)
    return str(path)


def tiny_fvit_cfg(emb_file,
                  class_names,
                  base_class_names=None,
                  train_class_names=None,
                  with_mask=False) -> dict:
    """The shipped F-ViT model at tiny size, as a plain dict."""
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
