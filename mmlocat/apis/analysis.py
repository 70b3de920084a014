"""Backbone maps on any image: build a model, load its backbone, prepare
network inputs.

Shared by ``tools/analysis_tools/vis_gaug.py`` and ``vis_patch_score.py``.
Any host config works (mmpretrain, mmseg, mmdet): the maps depend on the
backbone only, so a checkpoint may be a whole trained model or a converted
backbone (keys under ``backbone.``); either way the backbone must be fully
covered (no silently random weights).
"""
from typing import Dict, NamedTuple, Optional, Tuple

import numpy as np
import torch
from mmengine.config import Config
from mmengine.dataset import Compose, pseudo_collate
from mmengine.logging import MMLogger
from mmengine.registry import MODELS, init_default_scope

from mmlocat.utils.launch import load_config
from mmlocat.utils.pretrained import load_model_weights

__all__ = ['build_analysis_model', 'AnalysisInput', 'AnalysisModel']


class AnalysisInput:
    """Turns an image file into the network input and the RGB picture of
    that input, with the config's test pipeline (annotation loading
    removed) and the model's data preprocessor."""

    def __init__(self, cfg: Config, model: torch.nn.Module) -> None:
        steps = [
            t for t in cfg.test_dataloader.dataset.pipeline
            if not str(t['type']).endswith('LoadAnnotations')
        ]
        self.pipeline = Compose(steps)
        self.model = model

    def __call__(self, path: str) -> Tuple[torch.Tensor, np.ndarray]:
        """``(inputs (1, 3, H, W) on the model's device, RGB (H, W, 3)
        uint8)`` of the image as the network sees it (before
        normalisation)."""
        packed = self.pipeline(dict(img_path=path))
        with torch.no_grad():
            data = self.model.data_preprocessor(
                pseudo_collate([packed]), False)
        # the packed input is the pipeline's BGR uint8 image (C, H, W)
        img = packed['inputs'].numpy().transpose(1, 2, 0)[..., ::-1]
        return data['inputs'], np.ascontiguousarray(img)


class AnalysisModel(NamedTuple):
    """What :func:`build_analysis_model` returns."""
    model: torch.nn.Module
    cfg: Config
    prepare: AnalysisInput
    loaded: str  # 'model' or 'backbone' (see load_model_weights)


def build_analysis_model(config: str,
                         checkpoint: str,
                         device: str = 'cpu',
                         cfg_options: Optional[Dict] = None) -> AnalysisModel:
    """Model in eval mode, with its config and an :class:`AnalysisInput`
    for it.

    The checkpoint is loaded by
    :func:`mmlocat.utils.pretrained.load_model_weights` with
    ``accept_backbone=True``: a whole-model checkpoint, or else the
    backbone from it (its keys under ``backbone.``, or all its keys).

    Raises:
        RuntimeError / ValueError: If the checkpoint does not cover the
            backbone (missing keys, other shapes, foreign keys).
    """
    cfg = load_config(config)
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    init_default_scope(cfg.get('default_scope', 'mmpretrain'))
    model = MODELS.build(cfg.model)
    loaded = load_model_weights(
        model,
        checkpoint,
        accept_backbone=True,
        logger=MMLogger.get_current_instance()).part
    model = model.to(device).eval()
    return AnalysisModel(model, cfg, AnalysisInput(cfg, model), loaded)
