"""Training-free zero-shot semantic segmentation with a frozen CLIP tower.

The dense protocol of "Vision Transformers Need More Than Registers" (Shi
et al., CVPR 2026, https://arxiv.org/abs/2602.22394, Tab. 4): every patch
feature of a frozen CLIP / EVA02-CLIP image tower (the last block's patch
tokens after the final norm and the output projection) is compared by
cosine similarity with the class text embeddings; the per-pixel argmax of
the upsampled scores is the prediction. MaskCLIP's value path (Zhou et al.,
"Extract Free Dense Labels from CLIP", https://arxiv.org/abs/2112.01071)
is an option. Inference (whole image or sliding window) is mmseg's
``EncoderDecoder`` code, so ``test_cfg`` means what it means there.
"""
from typing import List, Optional, Sequence

import torch
import torch.nn.functional as F
from mmengine.config import ConfigDict
from mmseg.models.segmentors import BaseSegmentor, EncoderDecoder
from mmseg.utils import OptConfigType, OptMultiConfig, OptSampleList
from torch import Tensor

from mmlocat.datasets.text_embeddings import BACKGROUND, load_text_embeddings
from mmlocat.registry import MODELS

__all__ = ['ZeroShotSegmentor']


@MODELS.register_module()
class ZeroShotSegmentor(BaseSegmentor):
    """Zero-shot segmentor: patch-text cosine of a frozen CLIP tower.

    Per window: patch features ``f`` ``(h, w, D)`` (unit norm), logits
    ``logit_scale * f @ t.T`` with the unit-norm text embeddings ``t``
    ``(C, D)``, bilinearly resized to the window (as mmseg's decode heads).
    Windows are merged by ``EncoderDecoder.slide_inference`` (mean of the
    overlapping logits) or the whole image is one window
    (``test_cfg=dict(mode='whole')``). With a background class the merged
    logits become class probabilities (softmax over the ``C`` object
    classes) and a constant ``bg_thresh`` channel is put in front: a pixel is
    background when no class reaches that probability.

    The text embeddings are an embedding file of
    :mod:`mmlocat.datasets.text_embeddings` (e.g. written by
    ``tools/misc/dump_text_embeddings.py``) whose rows are the dataset's
    classes in label order, without the background class.
    :meth:`check_classes` compares them with the dataset (``classes`` at
    build, or :class:`mmlocat.ZeroShotClassCheckHook` before testing).

    Args:
        backbone: Config of a CLIP-like tower with a projection to the text
            space (``mmlocat.CLIPViT``, ``mmlocat.EVA02CLIPViT``). It is
            frozen, and ``out_type='featmap'`` / ``out_indices=-1`` are set
            (the last block after the final norm).
        text_embeddings: Path of the ``.npy`` embedding file (with its
            ``.json`` sidecar of class names).
        feature_tap: ``'last'`` (default, the paper's patch features: the
            last block's patch tokens, final norm, projection) or
            ``'value'`` (MaskCLIP's value path in the last block,
            ``backbone.forward_dense``).
        logit_scale: Multiplier of the cosine similarities (CLIP's learned
            scale is 100); only matters with a background threshold.
        bg_thresh: Probability below which a pixel is background; needed
            (and only allowed) when the dataset has a background class.
        background_class: Name of the dataset's background class; it must
            be the dataset's first class (mmseg's VOC / COCO-Object order).
        classes: The dataset's classes in label order, to check at build
            (``None`` leaves the check to :meth:`check_classes`).
        data_preprocessor: mmseg ``SegDataPreProcessor`` config.
        test_cfg: ``dict(mode='whole')`` or ``dict(mode='slide',
            crop_size=(h, w), stride=(h, w))``.
        init_cfg: Initialisation config.
    """
    FEATURE_TAPS = ('last', 'value')

    # mmseg's own inference code: it needs ``test_cfg``, ``out_channels``
    # and ``encode_decode`` only.
    inference = EncoderDecoder.inference
    whole_inference = EncoderDecoder.whole_inference
    slide_inference = EncoderDecoder.slide_inference

    def __init__(self,
                 backbone: dict,
                 text_embeddings: str,
                 feature_tap: str = 'last',
                 logit_scale: float = 100.,
                 bg_thresh: Optional[float] = None,
                 background_class: str = BACKGROUND,
                 classes: Optional[Sequence[str]] = None,
                 data_preprocessor: OptConfigType = None,
                 test_cfg: OptConfigType = None,
                 init_cfg: OptMultiConfig = None) -> None:
        super().__init__(
            data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        if feature_tap not in self.FEATURE_TAPS:
            raise ValueError(f'feature_tap must be one of '
                             f'{self.FEATURE_TAPS}, got {feature_tap!r}')
        if not logit_scale > 0:
            raise ValueError(f'logit_scale must be > 0, got {logit_scale}')
        if bg_thresh is not None and not 0 < bg_thresh < 1:
            raise ValueError(f'bg_thresh is a probability in (0, 1), got '
                             f'{bg_thresh}')
        backbone = dict(
            backbone, frozen=True, out_type='featmap', out_indices=-1)
        self.backbone = MODELS.build(backbone)
        if not hasattr(self.backbone, 'embed_global'):
            raise TypeError(f'{backbone["type"]} is not a CLIP tower (no '
                            'embed_global); use mmlocat.CLIPViT or '
                            'mmlocat.EVA02CLIPViT')
        if getattr(self.backbone, 'output_dims', None) is None and getattr(
                self.backbone, 'head', None) is None:
            raise ValueError(
                f'{backbone["type"]} has no projection to the text space '
                '(arch without output_dims): its patch tokens cannot be '
                'compared with text embeddings')
        emb, bg_row, names = load_text_embeddings(text_embeddings)
        if bg_row is not None:
            raise ValueError(
                f'{text_embeddings} has a {BACKGROUND!r} row; the zero-shot '
                'segmentor finds background by bg_thresh: write the file '
                'without --background')
        dims = self.backbone.embed_global(
            torch.zeros(1, self.backbone.embed_dims))
        if dims.shape[-1] != emb.shape[1]:
            raise ValueError(
                f'{text_embeddings} holds {emb.shape[1]}-d embeddings but '
                f'the tower projects to {dims.shape[-1]} dimensions')
        self.register_buffer(
            'text_embeddings', torch.from_numpy(emb), persistent=False)
        self.text_embeddings_file = text_embeddings
        self.class_names = names
        self.feature_tap = feature_tap
        self.logit_scale = float(logit_scale)
        self.bg_thresh = bg_thresh
        self.background_class = background_class
        self.out_channels = len(names)  # per-window logits (slide)
        self.num_classes = len(names) + (bg_thresh is not None)
        if self.num_classes < 2:
            raise ValueError('zero-shot segmentation needs at least 2 '
                             f'output classes, got {names}')
        self.align_corners = False
        self.test_cfg = ConfigDict(
            test_cfg if test_cfg is not None else dict(mode='whole'))
        if classes is not None:
            self.check_classes(classes)

    def check_classes(self, classes: Sequence[str]) -> None:
        """Raise unless ``classes`` (the dataset's, in label order) are the
        embedding file's classes, with the background class first when
        ``bg_thresh`` is set.

        Raises:
            ValueError: Another order, count or set of names; a background
                class without ``bg_thresh`` (or the reverse).
        """
        classes = list(classes)
        has_bg = self.background_class in classes
        if has_bg and self.bg_thresh is None:
            raise ValueError(
                f'the dataset has a {self.background_class!r} class but '
                'ZeroShotSegmentor has no bg_thresh: set bg_thresh (the '
                'probability below which a pixel is background)')
        if self.bg_thresh is not None and not has_bg:
            raise ValueError(
                f'bg_thresh={self.bg_thresh} is set but the dataset has no '
                f'{self.background_class!r} class: remove bg_thresh')
        if has_bg:
            if classes[0] != self.background_class:
                raise ValueError(
                    f'the background class must be the first class, found '
                    f'at {classes.index(self.background_class)}')
            classes = classes[1:]
        # The loader's comparison gives the difference by name and order.
        load_text_embeddings(self.text_embeddings_file, classes)

    def extract_feat(self, inputs: Tensor) -> Tensor:
        """``(B, D, h, w)`` unit-norm patch features in the text space."""
        if self.feature_tap == 'value':
            return self.backbone.forward_dense(inputs)[1]
        tokens = self.backbone(inputs)[-1]  # (B, C, h, w), after final norm
        feats = self.backbone.embed_global(tokens.permute(0, 2, 3, 1))
        return F.normalize(feats, dim=-1).permute(0, 3, 1, 2)

    def encode_decode(self, inputs: Tensor,
                      batch_img_metas: List[dict]) -> Tensor:
        """Scaled cosine logits ``(B, C, H, W)`` at the window's size."""
        feats = self.extract_feat(inputs)
        logits = torch.einsum('bdhw,cd->bchw', feats,
                              self.text_embeddings.to(feats.dtype))
        logits = F.interpolate(
            logits * self.logit_scale,
            size=inputs.shape[2:],
            mode='bilinear',
            align_corners=self.align_corners)
        return logits

    def with_background(self, seg_logits: Tensor) -> Tensor:
        """Object logits -> ``[bg_thresh, softmax probabilities]``; the
        logits unchanged without a background threshold."""
        if self.bg_thresh is None:
            return seg_logits
        probs = seg_logits.softmax(dim=1)
        background = probs.new_full(probs[:, :1].shape, self.bg_thresh)
        return torch.cat([background, probs], dim=1)

    @torch.no_grad()
    def predict(self,
                inputs: Tensor,
                data_samples: OptSampleList = None) -> list:
        """``SegDataSample``s with ``pred_sem_seg`` at the original size."""
        if data_samples is not None:
            batch_img_metas = [s.metainfo for s in data_samples]
        else:
            batch_img_metas = [
                dict(
                    ori_shape=inputs.shape[2:],
                    img_shape=inputs.shape[2:],
                    pad_shape=inputs.shape[2:],
                    padding_size=[0, 0, 0, 0])
            ] * inputs.shape[0]
        seg_logits = self.with_background(
            self.inference(inputs, batch_img_metas))
        return self.postprocess_result(seg_logits, data_samples)

    def _forward(self,
                 inputs: Tensor,
                 data_samples: OptSampleList = None) -> Tensor:
        """Per-window logits of the whole input (``mode='tensor'``)."""
        return self.encode_decode(inputs, [])

    def loss(self, inputs: Tensor, data_samples: OptSampleList) -> dict:
        """Not trainable: the tower is frozen and there is no head."""
        raise NotImplementedError(
            'ZeroShotSegmentor is training-free: use tools/test.py')
