"""F-ViT: a two-stage open-vocabulary detector on a frozen CLIP ViT.

CLIPSelf (Wu et al., "CLIPSelf: Vision Transformer Distills Itself for
Open-Vocabulary Dense Prediction", ICLR 2024,
https://arxiv.org/abs/2310.01403), ported from its mmdet 2.28 code to
mmdet 3.x: mmdet's ``TwoStageDetector`` with a frozen backbone, a trainable
neck (single-scale -> pyramid, then FPN), RPN and an RoI head whose box head
classifies by cosine with class text embeddings
(:class:`CosineSimBBoxHead`) and fuses CLIP's own region scores at test
time (:class:`FViTRoIHead`).
"""
from typing import Optional, Sequence, Tuple

import torch
from mmdet.models.detectors import TwoStageDetector
from mmdet.structures import SampleList
from mmdet.utils import ConfigType, OptConfigType, OptMultiConfig
from torch import Tensor

from mmlocat.registry import MODELS

__all__ = ['FViT']


@MODELS.register_module()
class FViT(TwoStageDetector):
    """Two-stage detector on a frozen ViT with CLIP score fusion.

    The backbone is frozen (no gradients, always in eval mode, run under
    ``torch.no_grad``); everything after it trains. With ``vlm_fusion`` the
    backbone must offer ``forward_dense`` (:class:`mmlocat.CLIPViT`): at test
    time its dense CLIP map feeds the RoI head's region scores.

    Args:
        backbone: Backbone config (e.g. ``mmlocat.CLIPViT`` with
            ``out_type='featmap'``).
        neck: Neck config; a list builds a sequence, e.g. the pyramid
            (``mmlocat.PatchScoreNeck``) followed by mmdet's ``FPN``.
        rpn_head, roi_head, train_cfg, test_cfg, data_preprocessor,
            init_cfg: As :class:`TwoStageDetector`.
        train_class_names: Classes of the training set's labels when they
            differ from the box head's ``class_names`` (e.g. the 48 OV-COCO
            base classes while the head knows all 65); labels are mapped to
            the head's classes by name.
        vlm_fusion: Fuse CLIP region scores at test time.
    """

    def __init__(self,
                 backbone: ConfigType,
                 neck: OptConfigType = None,
                 rpn_head: OptConfigType = None,
                 roi_head: OptConfigType = None,
                 train_cfg: OptConfigType = None,
                 test_cfg: OptConfigType = None,
                 data_preprocessor: OptConfigType = None,
                 train_class_names: Optional[Sequence[str]] = None,
                 vlm_fusion: bool = True,
                 init_cfg: OptMultiConfig = None) -> None:
        super().__init__(
            backbone=backbone,
            neck=neck,
            rpn_head=rpn_head,
            roi_head=roi_head,
            train_cfg=train_cfg,
            test_cfg=test_cfg,
            data_preprocessor=data_preprocessor,
            init_cfg=init_cfg)
        self.backbone.requires_grad_(False)
        self.backbone.eval()
        self.vlm_fusion = vlm_fusion
        if vlm_fusion:
            if not hasattr(self.backbone, 'forward_dense'):
                raise TypeError(
                    f'vlm_fusion needs a backbone with forward_dense (e.g. '
                    f'mmlocat.CLIPViT), not {type(self.backbone).__name__}; '
                    'set vlm_fusion=False')
            if not getattr(self.roi_head, 'with_vlm', False):
                raise ValueError('vlm_fusion needs roi_head='
                                 'mmlocat.FViTRoIHead with vlm_roi_extractor')
        label_map = None
        if train_class_names is not None:
            head_names = list(self.roi_head.bbox_head.class_names)
            missing = [n for n in train_class_names if n not in head_names]
            if missing:
                raise ValueError('train_class_names not in the box head '
                                 f'class_names: {missing}')
            label_map = torch.tensor(
                [head_names.index(n) for n in train_class_names])
        self.register_buffer('label_map', label_map, persistent=False)

    def train(self, mode: bool = True) -> 'FViT':
        """Set the mode; the frozen backbone always stays in eval mode."""
        super().train(mode)
        self.backbone.eval()
        return self

    def run_backbone(self,
                     batch_inputs: Tensor,
                     dense: bool = False) -> Tuple[tuple, Optional[Tensor]]:
        """Frozen backbone outputs and, if ``dense``, the CLIP map."""
        with torch.no_grad():
            if dense:
                feats, vlm_map = self.backbone.forward_dense(batch_inputs)
            else:
                feats, vlm_map = self.backbone(batch_inputs), None
        return feats, vlm_map

    def extract_feat(self, batch_inputs: Tensor) -> Tuple[Tensor]:
        """Pyramid features from the frozen backbone and trainable neck."""
        return self.neck(self.run_backbone(batch_inputs)[0])

    def loss(self, batch_inputs: Tensor,
             batch_data_samples: SampleList) -> dict:
        """As the parent, after mapping labels to the head's classes."""
        if self.label_map is not None:
            for sample in batch_data_samples:
                labels = sample.gt_instances.labels
                if labels.numel() and int(labels.max()) >= len(self.label_map):
                    raise ValueError(
                        f'label {int(labels.max())} outside the '
                        f'{len(self.label_map)} train_class_names')
                sample.gt_instances.labels = self.label_map[labels]
        return super().loss(batch_inputs, batch_data_samples)

    def predict(self,
                batch_inputs: Tensor,
                batch_data_samples: SampleList,
                rescale: bool = True) -> SampleList:
        """Detections; with ``vlm_fusion`` scores fuse CLIP's."""
        feats, vlm_map = self.run_backbone(batch_inputs, self.vlm_fusion)
        x = self.neck(feats)
        if batch_data_samples[0].get('proposals', None) is None:
            rpn_results_list = self.rpn_head.predict(
                x, batch_data_samples, rescale=False)
        else:
            rpn_results_list = [s.proposals for s in batch_data_samples]
        if self.vlm_fusion:
            results_list = self.roi_head.predict(
                x,
                rpn_results_list,
                batch_data_samples,
                rescale=rescale,
                vlm_map=vlm_map)
        else:
            results_list = self.roi_head.predict(
                x, rpn_results_list, batch_data_samples, rescale=rescale)
        return self.add_pred_to_datasample(batch_data_samples, results_list)
