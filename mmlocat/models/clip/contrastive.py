"""Contrastive image-text training of CLIP image towers (LaSt-CLIP).

The LaSt-ViT paper ("Vision Transformers Need More Than Registers",
https://arxiv.org/abs/2602.22394) fine-tunes CLIP towers with the
LazyStrike global token in CLIP's contrastive loss ("Learning Transferable
Visual Models From Natural Language Supervision",
https://arxiv.org/abs/2103.00020). :class:`CLIPContrastive` pairs an
mmlocat image tower (``CLIPViT`` / ``EVA02CLIPViT``, ``pooling`` LazyStrike
or CLS) with open_clip's own text tower and trains both (or the image tower
alone, ``lock_text``) with symmetric InfoNCE and a learnable logit scale,
as open_clip fine-tunes a pretrained CLIP
(https://github.com/mlfoundations/open_clip, ``open_clip_train``): the
scale starts at the pretrained checkpoint's, the forward uses
``exp(logit_scale)`` as it is, and the parameter is clamped to
``[0, log(100)]`` after every optimizer step
(:class:`mmlocat.LogitScaleClampHook`).

Both towers must come from the same CLIP: the text tower's open_clip
model name and weights sha256 are compared with the image tower's initial
checkpoint's record (``meta['clip']``, written by the converters) at build;
the run records both (:class:`mmlocat.CLIPProvenanceHook`) for the export.
"""
import logging
import math
import os.path as osp
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from mmengine.logging import print_log
from mmengine.model import BaseModel
from torch import Tensor, nn

from mmlocat.registry import MODELS
from mmlocat.utils.init_info import SummarisedInitInfo
from mmlocat.utils.pretrained import is_pretrained_cfg, pretrained_init_cfg
from mmlocat.utils.records import (CLIP_KEY, check_same_clip,
                                   read_checkpoint_meta)
from .text_tower import OpenCLIPTextTower

__all__ = ['CLIPContrastive', 'PRETRAINED_SCALE']

#: ``init_logit_scale`` value: the text weights file's ``logit_scale``.
PRETRAINED_SCALE = 'pretrained'


def _image_out_dims(encoder: nn.Module) -> int:
    out = getattr(encoder, 'output_dims', None)
    return int(out if out is not None else encoder.embed_dims)


def _image_init_record(encoder_cfg: dict,
                       required: bool = True) -> Tuple[Dict, Optional[str]]:
    """``(meta['clip'], checkpoint)`` of an image tower's initial weights.

    Args:
        encoder_cfg: The image tower config (``init_cfg`` or mmseg's
            ``pretrained``).
        required: Raise when an existing init checkpoint records no CLIP.

    Returns:
        The recorded CLIP (``{}`` without a ``Pretrained`` init, or while
        the file does not exist: its loading fails later, at
        ``init_weights``) and the checkpoint path (``None`` without one).

    Raises:
        ValueError: With ``required``, an existing init checkpoint without
            ``meta['clip']``.
    """
    init_cfg = pretrained_init_cfg(
        encoder_cfg.get('pretrained'), encoder_cfg.get('init_cfg'))
    if not is_pretrained_cfg(init_cfg):
        return {}, None
    checkpoint = init_cfg.get('checkpoint')
    if not (isinstance(checkpoint, str) and osp.isfile(checkpoint)):
        return {}, checkpoint  # init_weights names the missing file
    record = read_checkpoint_meta(checkpoint).get(CLIP_KEY) or {}
    if required and not (record.get('sha256') or record.get('text_sha256')):
        # the one rule's proof: a file hash or a text-tower fingerprint
        what = (f"names the CLIP {record['name']!r} only"
                if record.get('name') else "records no CLIP (meta['clip'])")
        raise ValueError(
            f'the image tower\'s init checkpoint {checkpoint} {what}, so '
            'the text tower cannot be checked against it; convert the tower '
            'with tools/model_converters/clip2mmlocat.py or '
            'eva02_clip2mmlocat.py (they record it), or set '
            'allow_mixed_clip=True')
    return dict(record), checkpoint


@MODELS.register_module()
class CLIPContrastive(SummarisedInitInfo, BaseModel):
    """CLIP-style contrastive model: mmlocat image tower + open_clip text.

    ``loss``: unit-norm image and text features, symmetric InfoNCE
    (:class:`~mmlocat.models.losses.CLIPContrastiveLoss`, features gathered
    over DDP ranks) at ``logit_scale.exp()``, as open_clip's forward (no
    clamp there: it would zero the scale's gradient); the parameter is
    clamped to ``[0, log(max_logit_scale)]`` after each optimizer step by
    :class:`mmlocat.LogitScaleClampHook` (:meth:`clamp_logit_scale`), as
    open_clip's training loop. ``predict``: each data sample gets
    ``image_embedding`` ``(D,)`` and, when it carries ``text_tokens``,
    ``text_embeddings`` ``(n, D)`` (unit norm), read by
    :class:`mmlocat.ZeroShotAccuracy` and :class:`mmlocat.RetrievalRecall`.

    Args:
        image_encoder: Image tower config (``mmlocat.CLIPViT`` or
            ``mmlocat.EVA02CLIPViT``, ``out_type='cls_token'``: the projected
            LazyStrike / CLS token).
        text_encoder: :class:`OpenCLIPTextTower` arguments (``model_name`` or
            ``model_cfg``, ``weights``, ``lock``, ``unlocked_layers``).
        lock_text: Freeze the text tower (open_clip's ``--lock-text``);
            overrides ``text_encoder['lock']`` when given.
        init_logit_scale: Initial ``log`` logit scale: ``'pretrained'``
            (default, open_clip's fine-tuning) reads ``logit_scale`` from
            the text tower's ``weights`` (the open_clip / OpenAI CLIP
            checkpoint; ``log(100)`` for OpenAI's releases) when the
            weights are loaded (:meth:`init_weights`); a number sets it
            (CLIP from scratch: ``log(1/0.07)``).
        max_logit_scale: ``exp`` of the clamp's upper end (CLIP: 100).
        allow_mixed_clip: Accept a text tower of another CLIP than the image
            tower's init (another open_clip name or weights sha256), or an
            init checkpoint that records no CLIP. Off: those are build
            errors.
        loss: Loss config.
        data_preprocessor: e.g. ``mmpretrain.ClsDataPreprocessor`` with CLIP's
            mean / std.
        init_cfg: mmengine init config.
    """

    def __init__(self,
                 image_encoder: dict,
                 text_encoder: dict,
                 lock_text: Optional[bool] = None,
                 init_logit_scale: Union[float, str] = PRETRAINED_SCALE,
                 max_logit_scale: float = 100.,
                 allow_mixed_clip: bool = False,
                 loss: dict = dict(type='mmlocat.CLIPContrastiveLoss'),
                 data_preprocessor: Optional[dict] = None,
                 init_cfg: Optional[dict] = None) -> None:
        if data_preprocessor is None:
            data_preprocessor = dict(type='mmpretrain.ClsDataPreprocessor')
        super().__init__(
            data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        image_encoder = dict(image_encoder)
        out_type = image_encoder.setdefault('out_type', 'cls_token')
        if out_type != 'cls_token':
            raise ValueError("CLIPContrastive needs the image tower's "
                             f"out_type='cls_token', got {out_type!r}")
        self.image_encoder = MODELS.build(image_encoder)
        text_encoder = dict(text_encoder)
        text_encoder.pop('type', None)
        if lock_text is not None:
            text_encoder['lock'] = lock_text
        self.text_encoder = OpenCLIPTextTower(**text_encoder)
        image_dims = _image_out_dims(self.image_encoder)
        if image_dims != self.text_encoder.embed_dim:
            name = text_encoder.get('model_name') or 'model_cfg'
            raise ValueError(
                f'the text tower ({name}) embeds into '
                f'{self.text_encoder.embed_dim} dims but the '
                f'image tower {image_encoder.get("type")} projects to '
                f'{image_dims}; set the image output_dims or the text '
                'embed_dim to match')
        self.logit_scale = nn.Parameter(
            torch.tensor(
                self._initial_scale(init_logit_scale, max_logit_scale)))
        self.init_logit_scale = init_logit_scale
        self.max_logit_scale = float(max_logit_scale)
        self._scale_checked = False
        self.loss_module = MODELS.build(loss)
        self.allow_mixed_clip = allow_mixed_clip
        self.clip_provenance = self._check_provenance(image_encoder)

    def _initial_scale(self, init_logit_scale: Union[float, str],
                       max_logit_scale: float) -> float:
        """The parameter's value at build (NaN until :meth:`init_weights`
        reads a pretrained one)."""
        if max_logit_scale <= 0:
            raise ValueError(
                f'max_logit_scale must be > 0, got {max_logit_scale}')
        if init_logit_scale == PRETRAINED_SCALE:
            if self.text_encoder.weights is None:
                raise ValueError(
                    "init_logit_scale='pretrained' reads logit_scale from "
                    'the text tower\'s weights file, but text_encoder has '
                    'no weights; give the open_clip / OpenAI checkpoint, or '
                    'a number (CLIP from scratch: log(1/0.07) = 2.6593)')
            return float('nan')
        if isinstance(init_logit_scale,
                      str) or not math.isfinite(init_logit_scale):
            raise ValueError(f'init_logit_scale must be {PRETRAINED_SCALE!r} '
                             f'or a finite number, got {init_logit_scale!r}')
        if not self._within_clamp(init_logit_scale, max_logit_scale):
            raise ValueError(
                f'need 0 <= init_logit_scale <= log(max_logit_scale), got '
                f'init_logit_scale={init_logit_scale}, '
                f'max_logit_scale={max_logit_scale}')
        return float(init_logit_scale)

    @staticmethod
    def _within_clamp(value: float, max_logit_scale: float) -> bool:
        # compared in the parameter's float32, as the clamp is
        value = torch.tensor(value, dtype=torch.float32)
        top = torch.tensor(math.log(max_logit_scale), dtype=torch.float32)
        return bool(0 <= value <= top)

    def _check_provenance(self, image_encoder: dict) -> Dict:
        """``{'text': ..., 'image': ...}``: the two towers' CLIP records,
        checked to be the same CLIP unless ``allow_mixed_clip``."""
        text = self.text_encoder.provenance()
        image, checkpoint = _image_init_record(
            image_encoder, required=not self.allow_mixed_clip)
        if checkpoint is not None:
            image['checkpoint'] = checkpoint
        if self.allow_mixed_clip:
            print_log(
                'CLIPContrastive: allow_mixed_clip=True: the text tower '
                f'{self.text_encoder.weights} is trained with the image '
                f'tower of {checkpoint} without checking that they come '
                'from one CLIP',
                logger='current',
                level=logging.WARNING)
        if image and not self.allow_mixed_clip:
            check_same_clip(
                text,
                self.text_encoder.weights or '(no weights file)',
                image,
                checkpoint,
                text_kind='the text tower weights',
                image_kind="the image tower's init checkpoint",
                hint='train both towers from the same CLIP (text_encoder '
                'model_name / weights of the CLIP the image tower was '
                'converted from), or set allow_mixed_clip=True')
        return dict(text=text, image=image)

    def init_weights(self) -> None:
        """Initialise the towers (the text tower loads its ``weights``),
        then, with ``init_logit_scale='pretrained'``, set the scale from
        those weights."""
        super().init_weights()
        if self.init_logit_scale != PRETRAINED_SCALE:
            return
        value = self.text_encoder.pretrained_logit_scale
        if value is None:
            raise ValueError(
                f"init_logit_scale='pretrained' but the text weights "
                f'{self.text_encoder.weights} hold no logit_scale; give '
                'init_logit_scale as a number')
        with torch.no_grad():
            self.logit_scale.fill_(value)
        self._scale_checked = False
        if not self._within_clamp(value, self.max_logit_scale):
            print_log(
                f'the pretrained logit scale {math.exp(value):.4f} of '
                f'{self.text_encoder.weights} is outside [1, '
                f'{self.max_logit_scale:g}]: it is used as it is for the '
                'first step and clamped after it (open_clip)',
                logger='current',
                level=logging.WARNING)

    def clamp_logit_scale(self) -> None:
        """Clamp the parameter to ``[0, log(max_logit_scale)]`` in place
        (open_clip, after every optimizer step)."""
        with torch.no_grad():
            self.logit_scale.clamp_(0, math.log(self.max_logit_scale))

    def scale(self) -> Tensor:
        """``exp(logit_scale)``, unclamped (open_clip's forward)."""
        if not self._scale_checked:
            # once: a NaN here is a scale never initialised
            if not torch.isfinite(self.logit_scale):
                raise RuntimeError(
                    "the logit scale is not set: with init_logit_scale="
                    "'pretrained' call init_weights() (mmengine's runner "
                    'does) to read it from the text weights, or load a '
                    'trained checkpoint')
            self._scale_checked = True
        return self.logit_scale.exp()

    def encode_image(self, images: Tensor) -> Tensor:
        """Unit-norm ``(B, D)`` image embeddings."""
        return F.normalize(self.image_encoder(images)[-1], dim=-1)

    def encode_text(self, tokens: Tensor) -> Tensor:
        """Unit-norm ``(N, D)`` text embeddings of token ids."""
        return F.normalize(self.text_encoder(tokens), dim=-1)

    @staticmethod
    def _tokens(data_samples: Sequence, device) -> Tensor:
        if not data_samples or 'text_tokens' not in data_samples[0]:
            raise ValueError('CLIPContrastive needs data samples with '
                             "'text_tokens' (mmlocat.TokenizeCaption + "
                             'mmlocat.PackCaptionInputs in the pipeline)')
        tokens = [
            s.text_tokens.reshape(-1, s.text_tokens.shape[-1])
            for s in data_samples
        ]
        return torch.cat(tokens).to(device)

    def loss(self, inputs: Tensor,
             data_samples: Sequence) -> Dict[str, Tensor]:
        """Contrastive loss of a batch of one caption per image."""
        tokens = self._tokens(data_samples, inputs.device)
        if tokens.shape[0] != inputs.shape[0]:
            raise ValueError(f'{tokens.shape[0]} captions for '
                             f'{inputs.shape[0]} images: training needs one '
                             'caption per image (group_by_image=False)')
        scale = self.scale()
        loss = self.loss_module(
            self.encode_image(inputs), self.encode_text(tokens), scale)
        return dict(loss=loss, logit_scale=scale.detach())

    def predict(self, inputs: Tensor, data_samples: Optional[List] = None):
        """Embeddings for the zero-shot and retrieval metrics."""
        images = self.encode_image(inputs)
        if data_samples is None:
            return images
        texts = None
        if 'text_tokens' in data_samples[0]:
            counts = [
                s.text_tokens.reshape(-1, s.text_tokens.shape[-1]).shape[0]
                for s in data_samples
            ]
            texts = self.encode_text(
                self._tokens(data_samples, inputs.device)).split(counts)
        for i, sample in enumerate(data_samples):
            sample.set_field(images[i], 'image_embedding')
            if texts is not None:
                sample.set_field(texts[i], 'text_embeddings')
        return data_samples

    def forward(self,
                inputs: Tensor,
                data_samples: Optional[List] = None,
                mode: str = 'tensor') -> Union[Dict, List, Tensor]:
        if mode == 'loss':
            return self.loss(inputs, data_samples)
        if mode == 'predict':
            return self.predict(inputs, data_samples)
        if mode == 'tensor':
            return self.encode_image(inputs)
        raise ValueError(f'invalid mode {mode!r}')
