"""Contrastive image-text training of CLIP image towers (LaSt-CLIP).

The LaSt-ViT paper ("Vision Transformers Need More Than Registers",
https://arxiv.org/abs/2602.22394) fine-tunes CLIP towers with the
LazyStrike global token in CLIP's contrastive loss ("Learning Transferable
Visual Models From Natural Language Supervision",
https://arxiv.org/abs/2103.00020). :class:`CLIPContrastive` pairs an
mmlocat image tower (``CLIPViT`` / ``EVA02CLIPViT``, ``pooling`` LazyStrike
or CLS) with open_clip's own text tower and trains both (or the image tower
alone, ``lock_text``) with symmetric InfoNCE and a learnable logit scale.
"""
import math
from typing import Dict, List, Optional, Sequence, Union

import torch
import torch.nn.functional as F
from mmengine.model import BaseModel
from torch import Tensor, nn

from mmlocat.registry import MODELS
from .text_tower import OpenCLIPTextTower

__all__ = ['CLIPContrastive']


def _image_out_dims(encoder: nn.Module) -> int:
    out = getattr(encoder, 'output_dims', None)
    return int(out if out is not None else encoder.embed_dims)


@MODELS.register_module()
class CLIPContrastive(BaseModel):
    """CLIP-style contrastive model: mmlocat image tower + open_clip text.

    ``loss``: unit-norm image and text features, symmetric InfoNCE
    (:class:`~mmlocat.models.losses.CLIPContrastiveLoss`, features gathered
    over DDP ranks) with ``logit_scale.exp()`` clamped to
    ``max_logit_scale``, as CLIP. ``predict``: each data sample gets
    ``image_embedding`` ``(D,)`` and, when it carries ``text_tokens``,
    ``text_embeddings`` ``(n, D)`` (unit norm), read by
    :class:`mmlocat.ZeroShotAccuracy` and :class:`mmlocat.RetrievalRecall`.

    Args:
        image_encoder: Image tower config (``mmlocat.CLIPViT`` or
            ``mmlocat.EVA02CLIPViT``, ``out_type='cls_token'``: the projected
            LazyStrike / CLS token).
        text_encoder: :class:`OpenCLIPTextTower` arguments (``model_name`` or
            ``model_cfg``, ``weights``, ``lock``, ``unlocked_layers``).
        lock_text: Freeze the text tower (LiT); overrides
            ``text_encoder['lock']`` when given.
        init_logit_scale: Initial ``log`` logit scale (CLIP: ``log(1/0.07)``).
        max_logit_scale: Clamp of ``exp(logit_scale)`` (CLIP: 100).
        loss: Loss config.
        data_preprocessor: e.g. ``mmpretrain.ClsDataPreprocessor`` with CLIP's
            mean / std.
        init_cfg: mmengine init config.
    """

    def __init__(self,
                 image_encoder: dict,
                 text_encoder: dict,
                 lock_text: Optional[bool] = None,
                 init_logit_scale: float = math.log(1 / 0.07),
                 max_logit_scale: float = 100.,
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
        if max_logit_scale <= 0 or math.exp(
                init_logit_scale) > max_logit_scale:
            raise ValueError(
                f'need 0 < exp(init_logit_scale) <= max_logit_scale, got '
                f'init_logit_scale={init_logit_scale}, '
                f'max_logit_scale={max_logit_scale}')
        self.logit_scale = nn.Parameter(torch.tensor(float(init_logit_scale)))
        self.max_logit_scale = float(max_logit_scale)
        self.loss_module = MODELS.build(loss)

    def scale(self) -> Tensor:
        """``exp(logit_scale)`` clamped to ``max_logit_scale`` (CLIP)."""
        return self.logit_scale.exp().clamp(max=self.max_logit_scale)

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
