"""F-ViT's RoI head: mmdet's ``StandardRoIHead`` plus CLIP region scores.

At test time each proposal also gets a 1x1 RoIAlign of the frozen CLIP's
dense map (CLIPSelf, https://arxiv.org/abs/2310.01403); the box head fuses
those region embeddings' class scores with its own. Optionally the box and
mask heads run under autocast (F-ViT's fp16 testing) while the RoIAlign
before them and the post-processing after them stay in fp32.
"""
import contextlib
from typing import List, Optional, Tuple

import torch
from mmdet.models.roi_heads import StandardRoIHead
from mmdet.structures import SampleList
from mmdet.structures.bbox import bbox2roi
from mmdet.utils import ConfigType, InstanceList
from torch import Tensor

from mmlocat.registry import MODELS

__all__ = ['FViTRoIHead']


@MODELS.register_module()
class FViTRoIHead(StandardRoIHead):
    """``StandardRoIHead`` whose predictions can fuse CLIP region scores.

    Args:
        vlm_roi_extractor: RoI extractor for the dense CLIP map, e.g.
            ``dict(type='SingleRoIExtractor', roi_layer=dict(type='RoIAlign',
            output_size=1, sampling_ratio=0), out_channels=512,
            featmap_strides=[16])``; None disables the fusion.
        **kwargs: :class:`StandardRoIHead` arguments; the box head must be
            :class:`~mmlocat.models.det.CosineSimBBoxHead` for the fusion.
    """

    def __init__(self,
                 vlm_roi_extractor: Optional[ConfigType] = None,
                 **kwargs) -> None:
        super().__init__(**kwargs)
        # Set by predict(autocast=...) for the duration of one prediction.
        self._autocast: Optional[torch.dtype] = None
        self.vlm_roi_extractor = (
            MODELS.build(vlm_roi_extractor)
            if vlm_roi_extractor is not None else None)
        if self.vlm_roi_extractor is not None and not hasattr(
                self.bbox_head, 'fuse_scores'):
            raise TypeError('vlm_roi_extractor needs a bbox head with '
                            'fuse_scores (mmlocat.CosineSimBBoxHead)')

    @property
    def with_vlm(self) -> bool:
        """Whether CLIP region scores are fused at test time."""
        return self.vlm_roi_extractor is not None

    def predict(self,
                x: Tuple[Tensor],
                rpn_results_list: InstanceList,
                batch_data_samples: SampleList,
                rescale: bool = False,
                vlm_map: Optional[Tensor] = None,
                autocast: Optional[torch.dtype] = None) -> InstanceList:
        """As the parent; ``vlm_map`` is the ``(B, D, h, w)`` CLIP map.

        ``autocast`` (e.g. ``torch.float16``) runs the box and mask heads
        under ``torch.autocast`` with that dtype; the RoIAlign of ``x`` and
        ``vlm_map`` (pass them in fp32), the box decoding, score fusion,
        NMS and mask pasting stay in fp32, as mmcv's ``force_fp32`` keeps
        them in F-ViT's fp16 testing.
        """
        batch_img_metas = [s.metainfo for s in batch_data_samples]
        self._autocast = autocast
        try:
            # With masks, boxes are rescaled together with the masks.
            results_list = self.predict_bbox(
                x,
                batch_img_metas,
                rpn_results_list,
                rcnn_test_cfg=self.test_cfg,
                rescale=rescale and not self.with_mask,
                vlm_map=vlm_map)
            if self.with_mask:
                results_list = self.predict_mask(
                    x, batch_img_metas, results_list, rescale=rescale)
        finally:
            self._autocast = None
        return results_list

    def _head_autocast(self, ref: Tensor):
        """Autocast for a head's layers while ``predict(autocast=...)``."""
        if self._autocast is None:
            return contextlib.nullcontext()
        return torch.autocast(ref.device.type, dtype=self._autocast)

    def _bbox_forward(self, x: Tuple[Tensor], rois: Tensor) -> dict:
        """As the parent; under ``autocast`` the box head alone runs in
        reduced precision and its outputs come back in fp32."""
        if self._autocast is None:
            return super()._bbox_forward(x, rois)
        bbox_feats = self.bbox_roi_extractor(
            x[:self.bbox_roi_extractor.num_inputs], rois)
        if self.with_shared_head:
            bbox_feats = self.shared_head(bbox_feats)
        with self._head_autocast(bbox_feats):
            cls_score, bbox_pred = self.bbox_head(bbox_feats)
        return dict(
            cls_score=cls_score.float(),
            bbox_pred=bbox_pred.float(),
            bbox_feats=bbox_feats)

    def _mask_forward(self,
                      x: Tuple[Tensor],
                      rois: Optional[Tensor] = None,
                      pos_inds: Optional[Tensor] = None,
                      bbox_feats: Optional[Tensor] = None) -> dict:
        """As the parent; under ``autocast`` the mask head alone runs in
        reduced precision (test time: ``rois`` given)."""
        if self._autocast is None or rois is None:
            return super()._mask_forward(x, rois, pos_inds, bbox_feats)
        mask_feats = self.mask_roi_extractor(
            x[:self.mask_roi_extractor.num_inputs], rois)
        if self.with_shared_head:
            mask_feats = self.shared_head(mask_feats)
        with self._head_autocast(mask_feats):
            mask_preds = self.mask_head(mask_feats)
        return dict(mask_preds=mask_preds.float(), mask_feats=mask_feats)

    def predict_bbox(self,
                     x: Tuple[Tensor],
                     batch_img_metas: List[dict],
                     rpn_results_list: InstanceList,
                     rcnn_test_cfg: ConfigType,
                     rescale: bool = False,
                     vlm_map: Optional[Tensor] = None) -> InstanceList:
        """Box predictions, fused with CLIP's scores if ``vlm_map``."""
        if vlm_map is None or not self.with_vlm:
            return super().predict_bbox(x, batch_img_metas, rpn_results_list,
                                        rcnn_test_cfg, rescale)
        proposals = [res.bboxes for res in rpn_results_list]
        rois = bbox2roi(proposals)
        if rois.shape[0] == 0:
            return super().predict_bbox(x, batch_img_metas, rpn_results_list,
                                        rcnn_test_cfg, rescale)
        bbox_results = self._bbox_forward(x, rois)
        vlm_feats = self.vlm_roi_extractor([vlm_map], rois).flatten(1)
        num = tuple(len(p) for p in proposals)
        return self.bbox_head.predict_by_feat(
            rois=rois.split(num),
            cls_scores=bbox_results['cls_score'].split(num),
            bbox_preds=bbox_results['bbox_pred'].split(num),
            batch_img_metas=batch_img_metas,
            rcnn_test_cfg=rcnn_test_cfg,
            rescale=rescale,
            vlm_feats=vlm_feats.split(num))
