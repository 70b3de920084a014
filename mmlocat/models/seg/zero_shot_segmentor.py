"""Training-free zero-shot semantic segmentation with a frozen CLIP tower.

The dense protocol of "Vision Transformers Need More Than Registers" (Shi
et al., CVPR 2026, https://arxiv.org/abs/2602.22394, Tab. 4), evaluated as
the evaluator its numbers come from, SCLIP's (Wang et al., "SCLIP:
Rethinking Self-Attention for Dense Vision-Language Inference",
https://arxiv.org/abs/2312.01597, github wangf3014/SCLIP
``clip_segmentor.py`` with its CSA switched off, i.e. vanilla CLIP): every
patch feature of a frozen CLIP / EVA02-CLIP image tower (the last block's
patch tokens after the final norm and the output projection, unit norm) is
compared by cosine with the text embedding of every query name (a class may
have several); the cosines of each sliding window are upsampled to the
window, averaged where windows overlap, upsampled to the original image,
then :class:`ZeroShotTextClassifier` scales, softmaxes over all names,
keeps each class's best name and takes the argmax. MaskCLIP's value path
(Zhou et al., https://arxiv.org/abs/2112.01071) is an option. Windowing is
mmseg's ``EncoderDecoder`` code, so ``test_cfg`` means what it means there.
"""
from typing import Dict, List, Optional, Sequence

import torch
import torch.nn.functional as F
from mmengine.config import ConfigDict
from mmengine.logging import print_log
from mmengine.structures import PixelData
from mmseg.models.segmentors import BaseSegmentor, EncoderDecoder
from mmseg.models.utils import resize
from mmseg.structures import SegDataSample
from mmseg.utils import OptConfigType, OptMultiConfig, OptSampleList
from torch import Tensor

from mmlocat.registry import MODELS
from mmlocat.text import (BACKGROUND, TEMPLATE_SETS, check_class_name_lines,
                          load_query_embeddings, read_class_name_file,
                          read_text_model, sidecar_path)
from mmlocat.utils.init_info import SummarisedInitInfo
from mmlocat.utils.pretrained import is_pretrained_cfg
from mmlocat.utils.records import (check_clip_pairing, check_prompt_recipe,
                                   check_same_classes)
from mmlocat.visualization.palette import class_palette
from .text_classifier import ZeroShotTextClassifier

__all__ = ['ZeroShotSegmentor']


@MODELS.register_module()
class ZeroShotSegmentor(SummarisedInitInfo, BaseSegmentor):
    """Zero-shot segmentor: patch-text cosine of a frozen CLIP tower.

    Per window: unit-norm patch features ``(h, w, D)`` against the ``Q``
    unit-norm query embeddings, cosines bilinearly resized to the window
    (:meth:`encode_decode`). Windows are merged by
    ``EncoderDecoder.slide_inference`` (mean of the overlapping cosines) or
    the whole image is one window (``test_cfg=dict(mode='whole')``). The
    merged cosines are resized to the original image (mmseg's
    ``postprocess_result``) and only then turned into class probabilities
    and labels (:class:`ZeroShotTextClassifier`), as SCLIP does.

    The text embeddings are an embedding file of
    :mod:`mmlocat.text.embeddings` written by
    ``tools/misc/dump_text_embeddings.py``: one row per query name, its
    sidecar mapping rows to classes (a file without the map is one row per
    class). A dataset's background class (label 0) is either one of the
    file's classes (SCLIP's text background, with ``prob_thd``) or
    mmlocat's constant channel (``bg_thresh``, the background then not in
    the file). :meth:`check_classes` compares the file's *classes* with the
    dataset's (``classes`` at build, or
    :class:`mmlocat.ZeroShotClassCheckHook` before testing).

    Checked at build: the query names against ``class_name_file``, the
    sidecar's prompt recipe against ``templates`` / ``prompt_style``, and
    the pairing of its text model with the tower checkpoint's CLIP record
    (the one rule, :func:`mmlocat.utils.records.check_clip_pairing`;
    ``check_clip=False`` opts out, logged).

    Args:
        backbone: Config of a CLIP-like tower with a projection to the text
            space (``mmlocat.CLIPViT``, ``mmlocat.EVA02CLIPViT``). It is
            frozen, and ``out_type='featmap'`` / ``out_indices=-1`` are set
            (the last block after the final norm).
        text_embeddings: Path of the ``.npy`` embedding file (with its
            ``.json`` sidecar).
        class_name_file: The class-name file the embeddings must have been
            written from (one line per class, names separated by ``', '``;
            SCLIP's format), or None (one name per class, not checked).
        templates: The prompt set the embeddings must have been written
            with (a key of ``TEMPLATE_SETS``; SCLIP's: ``'imagenet80'``),
            None accepts any.
        prompt_style: Their prompt style (SCLIP's: ``'plain'``), None
            accepts any.
        check_clip: Refuse embeddings that the tower checkpoint's CLIP
            record does not prove to be its own
            (:func:`mmlocat.utils.records.check_clip_pairing`: no record, a
            name-only one, a copied one, a sidecar without its text model
            or rows fingerprint, another CLIP). ``False`` accepts them,
            with a logged warning.
        feature_tap: ``'last'`` (default, the paper's and SCLIP's patch
            features) or ``'value'`` (MaskCLIP's value path in the last
            block, ``backbone.forward_dense``).
        logit_scale: Multiplier of the cosines before the softmax over the
            query names (SCLIP: 40 by default, 50 for COCO-Object).
        prob_thd: Pixels whose largest class probability is below it become
            label 0, which must be the file's background class (SCLIP:
            0.1 for COCO-Object, else 0).
        bg_thresh: mmlocat's constant background channel (an option): the
            file has no background class; a pixel is background when no
            class reaches this probability. Excludes ``prob_thd``.
        background_class: Name of the dataset's background class; it must
            be the dataset's first class (mmseg's VOC / COCO-Object order).
        classes: The dataset's classes in label order, to check at build
            (``None`` leaves the check to :meth:`check_classes`).
        data_preprocessor: mmseg ``SegDataPreProcessor`` config.
        test_cfg: ``dict(mode='whole')`` or ``dict(mode='slide',
            crop_size=(h, w), stride=(h, w))``.
        pretrained: mmseg's keyword (``mmseg.apis.init_model`` passes
            ``None``): a checkpoint for the backbone, as in mmseg's
            ``EncoderDecoder``.
        train_cfg: mmseg's keyword; must be None (nothing is trained).
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
                 class_name_file: Optional[str] = None,
                 templates: Optional[str] = 'imagenet80',
                 prompt_style: Optional[str] = 'plain',
                 check_clip: bool = True,
                 feature_tap: str = 'last',
                 logit_scale: float = 40.,
                 prob_thd: float = 0.,
                 bg_thresh: Optional[float] = None,
                 background_class: str = BACKGROUND,
                 classes: Optional[Sequence[str]] = None,
                 data_preprocessor: OptConfigType = None,
                 test_cfg: OptConfigType = None,
                 pretrained: Optional[str] = None,
                 train_cfg: OptConfigType = None,
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
        if not 0 <= prob_thd < 1:
            raise ValueError(f'prob_thd is a probability in [0, 1), got '
                             f'{prob_thd}')
        if prob_thd > 0 and bg_thresh is not None:
            raise ValueError(
                f'prob_thd={prob_thd} (SCLIP: a text background class) and '
                f'bg_thresh={bg_thresh} (a constant background channel) '
                'exclude each other: set one')
        if train_cfg:
            raise ValueError('ZeroShotSegmentor is training-free: train_cfg '
                             f'must be None, got {train_cfg}')
        backbone = dict(
            backbone, frozen=True, out_type='featmap', out_indices=-1)
        if pretrained is not None:
            backbone['pretrained'] = pretrained
        self.backbone = MODELS.build(backbone)
        if not hasattr(self.backbone, 'dense_embeddings'):
            raise TypeError(f'{backbone["type"]} is not a CLIP tower (no '
                            'dense_embeddings); use mmlocat.CLIPViT or '
                            'mmlocat.EVA02CLIPViT')
        if getattr(self.backbone, 'output_dims', None) is None and getattr(
                self.backbone, 'head', None) is None:
            raise ValueError(
                f'{backbone["type"]} has no projection to the text space '
                '(arch without output_dims): its patch tokens cannot be '
                'compared with text embeddings')
        table = load_query_embeddings(text_embeddings)
        self.text_embeddings_file = text_embeddings
        self.background_class = background_class
        self._check_background(table.classes, table.has_query_map, bg_thresh,
                               prob_thd)
        if class_name_file is not None:
            self._check_query_names(table, class_name_file)
        text_model = read_text_model(text_embeddings)
        check_prompt_recipe(
            text_model, text_embeddings,
            dict(templates=templates, prompt_style=prompt_style),
            'ZeroShotSegmentor', TEMPLATE_SETS)
        self._text_model = text_model
        self.check_clip = check_clip
        checkpoint = self._tower_checkpoint(backbone)
        if checkpoint:
            self.check_tower_checkpoint(checkpoint)
        dims = self.backbone.embed_global(
            torch.zeros(1, self.backbone.embed_dims))
        if dims.shape[-1] != table.embeddings.shape[1]:
            raise ValueError(
                f'{text_embeddings} holds {table.embeddings.shape[1]}-d '
                f'embeddings but the tower projects to {dims.shape[-1]} '
                'dimensions')
        self.decode_head = ZeroShotTextClassifier(
            torch.from_numpy(table.embeddings), table.query_class,
            table.classes, logit_scale, prob_thd, bg_thresh)
        self.class_names: List[str] = list(table.classes)
        self.query_names: List[str] = list(table.queries)
        self.feature_tap = feature_tap
        self.logit_scale = float(logit_scale)
        self.prob_thd = float(prob_thd)
        self.bg_thresh = bg_thresh
        self.out_channels = len(table.queries)  # per-window cosines (slide)
        self.num_classes = self.decode_head.num_classes
        if self.num_classes < 2:
            raise ValueError('zero-shot segmentation needs at least 2 '
                             f'output classes, got {table.classes}')
        self.align_corners = False
        self.test_cfg = ConfigDict(
            test_cfg if test_cfg is not None else dict(mode='whole'))
        self._palette: Optional[list] = None
        if classes is not None:
            self.check_classes(classes)

    @property
    def text_embeddings(self) -> Tensor:
        """``(Q, D)`` unit-norm query embeddings."""
        return self.decode_head.embeddings

    @property
    def output_classes(self) -> List[str]:
        """The label names, with the constant background channel's class
        first when ``bg_thresh`` is set."""
        if self.bg_thresh is not None:
            return [self.background_class] + self.class_names
        return list(self.class_names)

    @property
    def dataset_meta(self) -> Dict:
        """``classes`` (:attr:`output_classes`) and a ``palette`` of as
        many colours."""
        classes = self.output_classes
        palette = self._palette
        if palette is not None and len(palette) != len(classes):
            palette = None  # another label space's colours
        return dict(
            classes=classes, palette=class_palette(len(classes), palette))

    @dataset_meta.setter
    def dataset_meta(self, meta: Optional[Dict]) -> None:
        """Keep the palette of the same classes; other classes are not this
        segmentor's (mmseg's ``init_model`` / ``MMSegInferencer`` set a
        guess when a checkpoint has no ``dataset_meta``): its classes are
        its embedding file's."""
        meta = dict(meta or {})
        classes = meta.get('classes')
        if classes is not None and list(classes) != self.output_classes:
            print_log(
                f'ZeroShotSegmentor: dataset_meta names {len(classes)} '
                f'classes ({list(classes)[:3]}...); the segmentor predicts '
                f'the {len(self.output_classes)} classes of '
                f'{self.text_embeddings_file} and keeps them',
                logger='current')
            return
        if meta.get('palette') is not None:
            self._palette = [list(c) for c in meta['palette']]

    @staticmethod
    def _tower_checkpoint(backbone: dict) -> Optional[str]:
        init_cfg = backbone.get('init_cfg')
        if is_pretrained_cfg(init_cfg):
            return init_cfg.get('checkpoint')
        return backbone.get('pretrained')

    def _check_background(self, classes: List[str], has_map: bool,
                          bg_thresh: Optional[float], prob_thd: float) -> None:
        background = self.background_class
        path = self.text_embeddings_file
        if (not has_map and classes and classes[-1] == background
                and len(classes) > 1):
            raise ValueError(
                f'{path} has a {background!r} row last (F-ViT\'s background '
                'embedding); a zero-shot text background is the first '
                'class, written from a class-name file: dump it with '
                'tools/misc/dump_text_embeddings.py --seg-config')
        if bg_thresh is not None and background in classes:
            raise ValueError(
                f'{path} has a {background!r} class but bg_thresh is set '
                '(a constant background channel): write the file without '
                'the background, or remove bg_thresh to use it as a text '
                'class')
        if prob_thd > 0 and (not classes or classes[0] != background):
            raise ValueError(
                f'prob_thd={prob_thd} sends pixels to class 0, which must be '
                f'the {background!r} class, but {path} starts with '
                f'{classes[:1]}: dump it from a class-name file whose first '
                'line is the background, or set prob_thd=0')

    def _check_query_names(self, table, class_name_file: str) -> None:
        """The embedding file's query names must be ``class_name_file``'s,
        class by class (so nothing is re-ordered or stale)."""
        lines = read_class_name_file(class_name_file)
        path = self.text_embeddings_file
        found: List[List[str]] = [[] for _ in table.classes]
        for name, k in zip(table.queries, table.query_class):
            found[k].append(name)
        if len(lines) != len(found):
            raise ValueError(
                f'{class_name_file} has {len(lines)} lines (classes) but '
                f'{path} {len(found)} classes: dump the embeddings from it '
                '(tools/misc/dump_text_embeddings.py --seg-config)')
        check_class_name_lines(lines, table.classes, class_name_file)
        for k, (want, got) in enumerate(zip(lines, found)):
            if want != got:
                hint = ('; its sidecar has no row-to-class map (one row per '
                        'class)' if not table.has_query_map else '')
                raise ValueError(
                    f'{path} does not hold the names of {class_name_file}: '
                    f'class {k} ({table.classes[k]!r}) has {got} in '
                    f'{sidecar_path(path)} but {want} at line {k + 1} of '
                    f'the class-name file{hint}; dump the embeddings from '
                    'the config (tools/misc/dump_text_embeddings.py '
                    '--seg-config)')

    def check_tower_checkpoint(self,
                               checkpoint: str,
                               loaded: Optional[dict] = None) -> None:
        """Refuse a tower checkpoint that cannot be proven to come from the
        CLIP of the text embeddings (:func:`mmlocat.utils.records.
        check_clip_pairing`; ``check_clip=False`` logs instead): the
        ``init_cfg``'s file at build, and what ``tools/test.py`` (or a
        host's ``load_from``) loads, through
        :class:`mmlocat.ZeroShotClassCheckHook`.

        Args:
            checkpoint: The file (or, with ``loaded``, its name).
            loaded: The checkpoint dict as loaded; None: read the file.
        """
        check_clip_pairing(
            self._text_model,
            self.text_embeddings_file,
            checkpoint,
            'ZeroShotSegmentor',
            'check_clip=False',
            allowed=not self.check_clip,
            loaded=loaded)

    def check_classes(self, classes: Sequence[str]) -> None:
        """Raise unless ``classes`` (the dataset's, in label order) are the
        embedding file's classes; with ``bg_thresh`` the dataset's first
        class is the background and the file lacks it.

        Raises:
            ValueError: Another order, count or set of names; a background
                class the model cannot predict (or the reverse).
        """
        classes = list(classes)
        background = self.background_class
        has_bg = background in classes
        if has_bg and classes[0] != background:
            raise ValueError(
                f'the background class must be the first class, found '
                f'at {classes.index(background)}')
        if self.bg_thresh is not None:
            if not has_bg:
                raise ValueError(
                    f'bg_thresh={self.bg_thresh} is set but the dataset has '
                    f'no {background!r} class: remove bg_thresh')
            classes = classes[1:]
        elif has_bg and background not in self.class_names:
            raise ValueError(
                f'the dataset has a {background!r} class but '
                f'{self.text_embeddings_file} has no such class and '
                'ZeroShotSegmentor has no bg_thresh: dump the embeddings '
                'from a class-name file whose first line is the background '
                "(SCLIP's text background) or set bg_thresh (a constant "
                'background channel)')
        check_same_classes(self.class_names, classes,
                           self.text_embeddings_file)

    def extract_feat(self, inputs: Tensor) -> Tensor:
        """``(B, D, h, w)`` unit-norm patch features in the text space."""
        if self.feature_tap == 'value':
            return self.backbone.forward_dense(inputs)[1]
        tokens = self.backbone(inputs)[-1]  # (B, C, h, w), after final norm
        feats = self.backbone.embed_global(tokens.permute(0, 2, 3, 1))
        return F.normalize(feats, dim=-1).permute(0, 3, 1, 2)

    def encode_decode(self, inputs: Tensor,
                      batch_img_metas: List[dict]) -> Tensor:
        """Query cosines ``(B, Q, H, W)`` at the window's size (unscaled,
        as SCLIP averages and resizes them)."""
        cosines = self.decode_head(self.extract_feat(inputs))
        return F.interpolate(
            cosines,
            size=inputs.shape[2:],
            mode='bilinear',
            align_corners=self.align_corners)

    def postprocess_result(self,
                           seg_logits: Tensor,
                           data_samples: OptSampleList = None) -> list:
        """The query cosines un-padded, un-flipped and resized to the
        original image (the steps of mmseg's ``postprocess_result``), then
        class probabilities (``seg_logits``) and labels
        (``pred_sem_seg``)."""
        if data_samples is None:
            data_samples = [SegDataSample() for _ in range(len(seg_logits))]
            metas = [None] * len(seg_logits)
        else:
            metas = [s.metainfo for s in data_samples]
        height, width = seg_logits.shape[2:]
        for sample, meta, cosines in zip(data_samples, metas, seg_logits):
            if meta is not None:
                left, right, top, bottom = meta.get(
                    'img_padding_size', meta.get('padding_size', [0] * 4))
                cosines = cosines[None, :, top:height - bottom,
                                  left:width - right]
                if meta.get('flip'):
                    dims = (3, ) if meta.get(
                        'flip_direction') == 'horizontal' else (2, )
                    cosines = cosines.flip(dims=dims)
                cosines = resize(
                    cosines,
                    size=meta['ori_shape'],
                    mode='bilinear',
                    align_corners=self.align_corners,
                    warning=False)[0]
            probs = self.decode_head.class_probs(cosines)
            sample.set_data(
                dict(
                    seg_logits=PixelData(data=probs),
                    pred_sem_seg=PixelData(
                        data=self.decode_head.labels(probs))))
        return data_samples

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
        seg_logits = self.inference(inputs, batch_img_metas)
        return self.postprocess_result(seg_logits, data_samples)

    def _forward(self,
                 inputs: Tensor,
                 data_samples: OptSampleList = None) -> Tensor:
        """Query cosines of the whole input (``mode='tensor'``)."""
        return self.encode_decode(inputs, [])

    def loss(self, inputs: Tensor, data_samples: OptSampleList) -> dict:
        """Not trainable: the tower is frozen and there is no head."""
        raise NotImplementedError(
            'ZeroShotSegmentor is training-free: use tools/test.py')
