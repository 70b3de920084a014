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
import contextlib
from typing import Optional, Sequence, Tuple

import torch
from mmdet.models.detectors import TwoStageDetector
from mmdet.structures import SampleList
from mmdet.utils import ConfigType, InstanceList, OptConfigType, OptMultiConfig
from torch import Tensor

from mmlocat.registry import MODELS
from mmlocat.text import read_text_model
from mmlocat.utils.init_info import SummarisedInitInfo
from mmlocat.utils.pretrained import is_pretrained_cfg
from mmlocat.utils.records import check_clip_pairing
from ..backbones.vit_base import TokenLoopViT
from ..layers.finite import finite_checks_on
from .fvit_roi_head import FViTRoIHead

__all__ = ['FViT']

LAST_TAPS = ('value_path', 'block')
#: ``test_cfg.autocast`` values: reduced-precision dtypes of test time.
AUTOCAST_DTYPES = dict(float16=torch.float16, bfloat16=torch.bfloat16)


@MODELS.register_module()
class FViT(SummarisedInitInfo, TwoStageDetector):
    """Two-stage detector on a frozen ViT with CLIP score fusion.

    The backbone is frozen (built with ``frozen=True``: no gradients,
    always in eval mode; run under ``torch.no_grad``); everything after it
    trains. With ``vlm_fusion`` the
    backbone must offer ``forward_dense`` (:class:`mmlocat.CLIPViT`): at test
    time its dense CLIP map feeds the RoI head's region scores.

    Checked when the model is built: the text-embedding width against the
    backbone's output width and the CLIP RoI extractor's channels, and the
    pairing of the embedding sidecar's text model with the backbone
    checkpoint's CLIP record (:func:`mmlocat.utils.records.
    check_clip_pairing`: unproven or different is refused unless
    ``check_clip=False``).

    Args:
        backbone: Backbone config: one of mmlocat's ViTs (e.g.
            ``mmlocat.CLIPViT`` with ``out_type='featmap'``); it is built
            with ``frozen=True``.
        neck: Neck config; a list builds a sequence, e.g. the pyramid
            (``mmlocat.PatchScoreNeck``) followed by mmdet's ``FPN``.
        rpn_head, roi_head, train_cfg, test_cfg, data_preprocessor,
            init_cfg: As :class:`TwoStageDetector`.
        train_class_names: Classes of the training set's labels when they
            differ from the box head's ``class_names`` (e.g. the 48 OV-COCO
            base classes while the head knows all 65); labels are mapped to
            the head's classes by name. ``mmlocat.OVLabelSpaceHook`` checks
            the training data's classes against them (or, without them, the
            head's classes) before the first iteration.
        vlm_fusion: Fuse CLIP region scores at test time.
        last_tap: The backbone's last-layer tap (the stride-32 level of the
            pyramid), in training and test: ``'value_path'`` (F-ViT: the
            last block run on the value path, without the final norm; needs
            ``forward_dense``) or ``'block'`` (the ordinary last block and
            final norm).
        check_clip: Refuse text embeddings that the backbone checkpoint's
            CLIP record does not prove to be its own (the one rule,
            :func:`mmlocat.utils.records.check_clip_pairing`); ``False``
            accepts them with a logged warning. Only with ``vlm_fusion``
            (a CLIP tower): a backbone without CLIP alignment has no CLIP
            to match.

    ``test_cfg.autocast`` (``None``, the default: fp32; ``'float16'``;
    ``'bfloat16'``) tests as F-ViT does with its configs' ``fp16`` setting
    (mmcv's ``wrap_fp16_model``: the detector under ``auto_fp16``, its
    ``force_fp32`` parts in fp32): the backbone, neck, RPN and RoI heads run
    under ``torch.autocast`` with that dtype; proposal decoding and NMS, the
    RoIAlign of the features and of the CLIP map, box decoding, score
    fusion, NMS and mask pasting in fp32.
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
                 last_tap: str = 'value_path',
                 check_clip: bool = True,
                 init_cfg: OptMultiConfig = None) -> None:
        if last_tap not in LAST_TAPS:
            raise ValueError(
                f'last_tap must be one of {LAST_TAPS}, got {last_tap!r}')
        autocast = (test_cfg or {}).get('autocast')
        if autocast is not None and autocast not in AUTOCAST_DTYPES:
            raise ValueError('test_cfg.autocast must be None (fp32) or one of '
                             f'{sorted(AUTOCAST_DTYPES)}, got {autocast!r}')
        super().__init__(
            backbone=self._frozen_backbone_cfg(backbone),
            neck=neck,
            rpn_head=rpn_head,
            roi_head=roi_head,
            train_cfg=train_cfg,
            test_cfg=test_cfg,
            data_preprocessor=data_preprocessor,
            init_cfg=init_cfg)
        self.vlm_fusion = vlm_fusion
        self.check_clip = check_clip
        self.value_path_tap = (
            last_tap == 'value_path'
            and self._last_layer_tapped(self.backbone))
        if self.value_path_tap and not hasattr(self.backbone, 'forward_dense'):
            raise TypeError(
                "last_tap='value_path' needs a backbone with forward_dense "
                f'(e.g. mmlocat.CLIPViT), not {type(self.backbone).__name__}; '
                "set last_tap='block'")
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
        # The classes training labels index (checked against the training
        # data by mmlocat.OVLabelSpaceHook).
        head_classes = getattr(self.roi_head.bbox_head, 'class_names', ())
        self.train_label_names = list(head_classes if train_class_names is
                                      None else train_class_names)
        if train_class_names is not None:
            head_names = list(self.roi_head.bbox_head.class_names)
            missing = [n for n in train_class_names if n not in head_names]
            if missing:
                raise ValueError('train_class_names not in the box head '
                                 f'class_names: {missing}')
            label_map = torch.tensor(
                [head_names.index(n) for n in train_class_names])
        self.register_buffer('label_map', label_map, persistent=False)
        self._check_text_embeddings(backbone)
        self.test_autocast = AUTOCAST_DTYPES.get(autocast)
        if self.test_autocast is not None and not isinstance(
                self.roi_head, FViTRoIHead):
            raise TypeError('test_cfg.autocast needs roi_head='
                            'mmlocat.FViTRoIHead, not '
                            f'{type(self.roi_head).__name__}')

    @staticmethod
    def _last_layer_tapped(backbone) -> bool:
        num_layers = getattr(backbone, 'num_layers', None)
        indices = getattr(backbone, 'out_indices', ())
        return num_layers is not None and (num_layers - 1) in list(indices)

    def _check_text_embeddings(self, backbone_cfg: ConfigType) -> None:
        """Fail at build, not at the first prediction, on embeddings that
        cannot work with this backbone."""
        head = getattr(self.roi_head, 'bbox_head', None)
        emb_file = getattr(head, 'text_embeddings_file', None)
        if emb_file is None:
            return
        width = head.embed_dims
        out_dims = getattr(self.backbone, 'output_dims', None)
        if self.vlm_fusion and out_dims is not None and out_dims != width:
            raise ValueError(
                f'{emb_file} holds {width}-d text embeddings but the backbone '
                f'{type(self.backbone).__name__} projects to {out_dims}-d '
                'CLIP space; dump them with the text tower of the same CLIP')
        extractor = getattr(self.roi_head, 'vlm_roi_extractor', None)
        channels = getattr(extractor, 'out_channels', None)
        if channels is not None and channels != width:
            raise ValueError(
                f'{emb_file} holds {width}-d text embeddings but '
                f'roi_head.vlm_roi_extractor.out_channels is {channels}; set '
                f'it to {width}')
        init_cfg = backbone_cfg.get('init_cfg') if isinstance(
            backbone_cfg, dict) else None
        checkpoint = (
            init_cfg.get('checkpoint')
            if is_pretrained_cfg(init_cfg) else None)
        # the pairing is the CLIP's: a tower without CLIP alignment (a
        # LocAtViT, no score fusion) has no CLIP to match
        if checkpoint and self.vlm_fusion:
            check_clip_pairing(
                read_text_model(emb_file),
                emb_file,
                checkpoint,
                'FViT',
                'check_clip=False',
                allowed=not self.check_clip)

    @staticmethod
    def _frozen_backbone_cfg(backbone: ConfigType) -> dict:
        """``backbone`` with ``frozen=True`` (the backbones' one freezing
        mechanism), after checking that it is one of mmlocat's ViTs."""
        if backbone.get('frozen', True) is not True:
            raise ValueError('FViT trains on a frozen backbone: '
                             'backbone.frozen must be True or left out, got '
                             f"{backbone['frozen']!r}")
        kind = backbone.get('type')
        cls = MODELS.get(kind) if isinstance(kind, str) else kind
        if isinstance(cls, type) and not issubclass(cls, TokenLoopViT):
            raise TypeError(
                f'FViT freezes its backbone with frozen=True, an option of '
                f"mmlocat's ViTs (CLIPViT, EVA02CLIPViT, LaStViT, LocAtViT); "
                f'{kind!r} has none')
        return dict(backbone, frozen=True)

    def run_backbone(self,
                     batch_inputs: Tensor,
                     dense: bool = False) -> Tuple[tuple, Optional[Tensor]]:
        """Frozen backbone outputs and, if ``dense``, the CLIP map.

        Both are made contiguous, as F-ViT's ``_expand_x`` does: the maps
        are permuted token grids (channels-last strides, which the convs
        downstream keep), and mmcv's ``RoIAlign`` reads its input as
        contiguous NCHW memory (open-mmlab/mmcv#2203): RoI features of
        strided maps would be taken from the wrong places.
        """
        # The non-finite policy follows the detector, not the (always eval)
        # backbone: no check, hence no host sync, while training.
        check = finite_checks_on(None, self.training)
        with torch.no_grad():
            if dense or self.value_path_tap:
                feats, vlm_map = self.backbone.forward_dense(
                    batch_inputs,
                    value_path_tap=self.value_path_tap,
                    check_finite=check)
            else:
                feats, vlm_map = self.backbone(
                    batch_inputs, check_finite=check), None
        feats = tuple(f.contiguous() for f in feats)
        if not dense:
            vlm_map = None
        elif vlm_map is not None:
            vlm_map = vlm_map.contiguous()
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

    def _autocast(self, ref: Tensor):
        """``test_cfg.autocast`` around the layers run in reduced precision.
        """
        if self.test_autocast is None:
            return contextlib.nullcontext()
        return torch.autocast(ref.device.type, dtype=self.test_autocast)

    def predict_proposals(self, x: Tuple[Tensor],
                          batch_data_samples: SampleList) -> InstanceList:
        """RPN proposals (``rpn_head.predict``); with ``test_cfg.autocast``
        the RPN convs run under autocast, the decoding and NMS in fp32."""
        if self.test_autocast is None:
            return self.rpn_head.predict(x, batch_data_samples, rescale=False)
        with self._autocast(x[0]):
            cls_scores, bbox_preds = self.rpn_head(x)
        return self.rpn_head.predict_by_feat(
            [t.float() for t in cls_scores], [t.float() for t in bbox_preds],
            batch_img_metas=[s.metainfo for s in batch_data_samples],
            rescale=False)

    def predict(self,
                batch_inputs: Tensor,
                batch_data_samples: SampleList,
                rescale: bool = True) -> SampleList:
        """Detections; with ``vlm_fusion`` scores fuse CLIP's."""
        with self._autocast(batch_inputs):
            feats, vlm_map = self.run_backbone(batch_inputs, self.vlm_fusion)
            x = self.neck(feats)
        kwargs = {}
        if self.test_autocast is not None:
            # mmcv's force_fp32 in F-ViT: RoIAlign and after in fp32
            x = tuple(t.float() for t in x)
            vlm_map = vlm_map if vlm_map is None else vlm_map.float()
            kwargs['autocast'] = self.test_autocast
        if batch_data_samples[0].get('proposals', None) is None:
            rpn_results_list = self.predict_proposals(x, batch_data_samples)
        else:
            rpn_results_list = [s.proposals for s in batch_data_samples]
        if self.vlm_fusion:
            kwargs['vlm_map'] = vlm_map
        results_list = self.roi_head.predict(
            x, rpn_results_list, batch_data_samples, rescale=rescale, **kwargs)
        return self.add_pred_to_datasample(batch_data_samples, results_list)
