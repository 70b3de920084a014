"""F-ViT's RoI box head: a cosine classifier over class text embeddings.

CLIPSelf / F-ViT (Wu et al., ICLR 2024, https://arxiv.org/abs/2310.01403):
RoI features pass 4 shared convs and 2 shared FCs (mmdet's
``ConvFCBBoxHead``), then one more FC in each of the classification and
regression branches; the classification FC is as wide as the text
embedding and the logits are ``T * cos(ReLU(fc(x)), embedding)`` for every
class plus the (fixed) text embedding of "background", with a learnable
temperature ``T``. At test time the
class probabilities can be fused with CLIP's own region scores
``q = softmax(T_vlm * cos(region embedding, embedding))`` as
``p^(1-a) * q^a`` with ``a = alpha`` on base classes and background and
``a = beta`` on novel classes.
"""
import os.path as osp
from typing import List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from mmdet.models.layers import multiclass_nms
from mmdet.models.roi_heads.bbox_heads import ConvFCBBoxHead
from mmengine.config import ConfigDict
from mmengine.structures import InstanceData
from torch import Tensor, nn

from mmlocat.registry import MODELS
from mmlocat.text import (BACKGROUND, load_text_embeddings, read_class_names,
                          resolve_class_names, sidecar_path)

__all__ = ['CosineSimBBoxHead']

NameSpec = Union[str, Sequence[str]]
CLS_EMBEDS = ('relu_fc', 'linear')
BACKGROUNDS = ('text', 'learned', 'learned_random')


@MODELS.register_module()
class CosineSimBBoxHead(ConvFCBBoxHead):
    """Cosine text-embedding classifier with F-ViT's test-time fusion.

    Args:
        text_embeddings: ``(C[+1], D)`` ``.npy`` file with a ``.json``
            class-name sidecar (see :mod:`mmlocat.text.embeddings`);
            checked against ``class_names`` (names and order).
        class_names: The label space: names, a ``.json``/``.txt`` file (an
            annotation file gives its categories in id order), or a
            registered mmdet dataset type (its ``METAINFO['classes']``).
            None: the names in the embedding sidecar (written from the
            annotation file by ``tools/misc/dump_text_embeddings.py``).
        base_class_names: Classes seen in training (names or file); the
            others are novel: class weight 0 in the loss and ``beta`` in the
            fusion. None: every class is base.
        bg_class_weight: Background class weight in the loss (F-ViT: 0.6
            OV-COCO, 0.9 OV-LVIS).
        background: ``'text'`` (F-ViT's default: the fixed ``background``
            row of the embedding file), ``'learned'`` (a parameter
            initialised from that row, F-ViT's ``learn_bg=True``) or
            ``'learned_random'`` (a parameter from a random unit vector).
            ``'text'`` and ``'learned'`` need the row.
        cls_embed: ``'relu_fc'`` (F-ViT: the cosine is taken on the ReLU'd
            output of the last classification FC, whose width must be the
            text-embedding width) or ``'linear'`` (a linear projection of
            that output to the text width).
        temperature: Initial classifier temperature.
        learn_temperature: Learn the temperature (else fixed).
        vlm_temperature: Temperature of CLIP's region scores.
        alpha: Fusion exponent of base classes and background.
        beta: Fusion exponent of novel classes.
        num_cls_fcs, num_reg_fcs: FCs of the classification / regression
            branch after the shared FCs (F-ViT: 1 each).
        **kwargs: :class:`ConvFCBBoxHead` arguments; ``num_classes`` is
            ``len(class_names)``.
    """

    def __init__(self,
                 text_embeddings: str,
                 class_names: Optional[NameSpec] = None,
                 base_class_names: Optional[NameSpec] = None,
                 bg_class_weight: float = 1.0,
                 background: str = 'text',
                 cls_embed: str = 'relu_fc',
                 temperature: float = 50.0,
                 learn_temperature: bool = True,
                 vlm_temperature: float = 75.0,
                 alpha: float = 0.1,
                 beta: float = 0.8,
                 num_shared_convs: int = 4,
                 num_shared_fcs: int = 2,
                 num_cls_fcs: int = 1,
                 num_reg_fcs: int = 1,
                 fc_out_channels: int = 512,
                 reg_class_agnostic: bool = True,
                 loss_cls: dict = dict(type='mmlocat.OVCrossEntropyLoss'),
                 **kwargs) -> None:
        if background not in BACKGROUNDS:
            raise ValueError(f'background must be one of {BACKGROUNDS}, got '
                             f'{background!r}')
        if cls_embed not in CLS_EMBEDS:
            raise ValueError(f'cls_embed must be one of {CLS_EMBEDS}, got '
                             f'{cls_embed!r}')
        if class_names is None:
            names = read_class_names(sidecar_path(text_embeddings))
            if names and names[-1] == BACKGROUND:
                names = names[:-1]
        else:
            names = resolve_class_names(class_names)
        if kwargs.get('num_classes', len(names)) != len(names):
            raise ValueError(f'num_classes={kwargs["num_classes"]} but '
                             f'class_names has {len(names)} entries')
        kwargs['num_classes'] = len(names)
        embeddings, text_background, _ = load_text_embeddings(
            text_embeddings, names)
        if text_background is None and background != 'learned_random':
            raise ValueError(
                f'{text_embeddings} has no {BACKGROUND!r} row, which '
                f'background={background!r} needs: dump it with '
                'tools/misc/dump_text_embeddings.py --background, or set '
                "background='learned_random'")
        base = names if base_class_names is None else resolve_class_names(
            base_class_names)
        unknown = sorted(set(base) - set(names))
        if unknown:
            raise ValueError(f'base classes not in class_names: {unknown}')
        for key, value in (('alpha', alpha), ('beta', beta)):
            if not 0 <= value <= 1:
                raise ValueError(f'{key} must be in [0, 1], got {value}')
        is_base = [n in set(base) for n in names] + [True]
        class_weight = [float(b) for b in is_base[:-1]] + [bg_class_weight]
        loss_cls = ConfigDict(loss_cls)
        if str(loss_cls['type']).endswith('OVCrossEntropyLoss'):
            loss_cls.setdefault('class_weight', class_weight)
        elif not all(is_base):
            raise ValueError('novel classes need weight 0 in the softmax: '
                             "use loss_cls=dict(type='mmlocat."
                             "OVCrossEntropyLoss')")
        super().__init__(
            num_shared_convs=num_shared_convs,
            num_shared_fcs=num_shared_fcs,
            num_cls_fcs=num_cls_fcs,
            num_reg_fcs=num_reg_fcs,
            fc_out_channels=fc_out_channels,
            reg_class_agnostic=reg_class_agnostic,
            loss_cls=loss_cls,
            **kwargs)
        self.class_names = names
        # the files read (mmlocat.RecordHook records them)
        self.text_embeddings_file = text_embeddings
        self.base_class_names_file = (
            base_class_names if isinstance(base_class_names, str)
            and osp.isfile(base_class_names) else None)
        self.embed_dims = embeddings.shape[1]
        self.cls_embed = cls_embed
        if cls_embed == 'relu_fc':
            if self.cls_last_dim != self.embed_dims:
                raise ValueError(
                    f'{text_embeddings} holds {self.embed_dims}-d text '
                    'embeddings but the classification branch outputs '
                    f'{self.cls_last_dim} channels (fc_out_channels='
                    f'{fc_out_channels}); with cls_embed=\'relu_fc\' they '
                    f'must be equal: set fc_out_channels={self.embed_dims}')
            # The cosine is taken on the branch's ReLU'd output directly.
            self.fc_cls = nn.Identity()
        else:
            # A projection to the text space in place of the (C + 1)-way fc.
            self.fc_cls = nn.Linear(self.cls_last_dim, self.embed_dims)
        # Not saved: the vocabulary comes from the file, so a checkpoint can
        # be tested with other class embeddings.
        self.register_buffer(
            'text_embeddings', torch.from_numpy(embeddings), persistent=False)
        self.register_buffer(
            'is_base', torch.tensor(is_base), persistent=False)
        self.background = background
        if background == 'learned_random':
            init_bg = F.normalize(torch.randn(self.embed_dims), dim=0)
        else:
            init_bg = torch.from_numpy(text_background).clone()
        if background == 'text':
            self.register_buffer('bg_embedding', init_bg, persistent=False)
        else:
            self.bg_embedding = nn.Parameter(init_bg)
        init_t = torch.tensor(float(temperature))
        if learn_temperature:
            self.temperature = nn.Parameter(init_t)
        else:
            self.register_buffer('temperature', init_t)
        self.vlm_temperature = vlm_temperature
        self.alpha = alpha
        self.beta = beta

    def classifier_weights(self) -> Tensor:
        """``(C + 1, D)`` unit class embeddings, background last."""
        bg = F.normalize(self.bg_embedding, dim=0)[None]
        return torch.cat([self.text_embeddings, bg.to(self.text_embeddings)])

    def cosine_logits(self, feats: Tensor) -> Tensor:
        """``(N, C + 1)`` logits ``T * cos(feats, class embeddings)``."""
        weights = self.classifier_weights().to(feats.dtype)
        return self.temperature * F.normalize(feats, dim=-1) @ weights.t()

    def forward(self, x: Tensor) -> Tuple[Tensor, Tensor]:
        """``(cls_score (N, C + 1) logits, bbox_pred (N, 4))``."""
        # fc_cls is the identity (relu_fc) or the projection (linear).
        feats, bbox_pred = super().forward(x)
        return self.cosine_logits(feats), bbox_pred

    def vlm_scores(self, vlm_feats: Tensor) -> Tensor:
        """CLIP's region probabilities ``softmax(T_vlm * cos)``."""
        weights = self.classifier_weights().to(vlm_feats.dtype)
        cos = F.normalize(vlm_feats, dim=-1) @ weights.t()
        return F.softmax(self.vlm_temperature * cos, dim=-1)

    def fuse_scores(self,
                    cls_score: Tensor,
                    vlm_feats: Optional[Tensor] = None) -> Tensor:
        """Detector probabilities, fused with CLIP's if ``vlm_feats``."""
        probs = F.softmax(cls_score.float(), dim=-1)
        if vlm_feats is None:
            return probs
        vlm = self.vlm_scores(vlm_feats.float())
        exponent = torch.where(self.is_base, self.alpha, self.beta).to(probs)
        return probs**(1 - exponent) * vlm**exponent

    def predict_by_feat(
            self,
            rois: Tuple[Tensor],
            cls_scores: Tuple[Tensor],
            bbox_preds: Tuple[Tensor],
            batch_img_metas: List[dict],
            rcnn_test_cfg: Optional[ConfigDict] = None,
            rescale: bool = False,
            vlm_feats: Optional[Tuple[Tensor]] = None) -> List[InstanceData]:
        """As the parent, with per-image CLIP region features to fuse."""
        if vlm_feats is None:
            vlm_feats = (None, ) * len(batch_img_metas)
        return [
            self._predict_by_feat_single(
                roi=rois[i],
                cls_score=cls_scores[i],
                bbox_pred=bbox_preds[i],
                img_meta=batch_img_metas[i],
                rescale=rescale,
                rcnn_test_cfg=rcnn_test_cfg,
                vlm_feat=vlm_feats[i]) for i in range(len(batch_img_metas))
        ]

    def _predict_by_feat_single(
            self,
            roi: Tensor,
            cls_score: Tensor,
            bbox_pred: Tensor,
            img_meta: dict,
            rescale: bool = False,
            rcnn_test_cfg: Optional[ConfigDict] = None,
            vlm_feat: Optional[Tensor] = None) -> InstanceData:
        if roi.shape[0] == 0:
            return super()._predict_by_feat_single(roi, cls_score, bbox_pred,
                                                   img_meta, rescale,
                                                   rcnn_test_cfg)
        # The parent decodes and rescales the boxes; the scores are ours
        # (fused probabilities are not re-normalised, as in F-ViT).
        raw = super()._predict_by_feat_single(
            roi, cls_score, bbox_pred, img_meta, rescale, rcnn_test_cfg=None)
        scores = self.fuse_scores(cls_score, vlm_feat)
        if rcnn_test_cfg is None:
            raw.scores = scores
            return raw
        det_bboxes, det_labels = multiclass_nms(
            raw.bboxes,
            scores,
            rcnn_test_cfg.score_thr,
            rcnn_test_cfg.nms,
            rcnn_test_cfg.max_per_img,
            box_dim=4)
        results = InstanceData()
        results.bboxes = det_bboxes[:, :-1]
        results.scores = det_bboxes[:, -1]
        results.labels = det_labels
        return results
