"""Softmax cross-entropy whose zero-weight classes leave the softmax.

F-ViT (CLIPSelf, https://arxiv.org/abs/2310.01403) trains the cosine
classifier over the whole vocabulary but gives the novel classes weight 0:
their logits must not take part in the softmax at all (otherwise every
proposal would teach the head that novel classes are wrong), and the
background gets its own weight (0.6 on OV-COCO). mmdet's
``CrossEntropyLoss`` only weights the target class, so this loss masks the
zero-weight logits out before the softmax.
"""
from typing import Optional, Sequence

import torch
import torch.nn.functional as F
from mmdet.models.losses.utils import weight_reduce_loss
from torch import Tensor, nn

from mmlocat.registry import MODELS

__all__ = ['OVCrossEntropyLoss']


@MODELS.register_module()
class OVCrossEntropyLoss(nn.Module):
    """Class-weighted softmax CE; classes with weight 0 are masked out.

    ``loss_i = w[y_i] * CE(logits_i with weight-0 classes removed, y_i)``,
    reduced as mmdet's ``CrossEntropyLoss`` (sample weights, ``avg_factor``).
    Samples whose target has weight 0 contribute 0.

    Args:
        class_weight: Weight per class (``num_classes + 1`` entries with the
            background last); None is plain softmax CE.
        loss_weight: Multiplier of the loss.
        reduction: ``'none'``, ``'mean'`` or ``'sum'``.
    """

    def __init__(self,
                 class_weight: Optional[Sequence[float]] = None,
                 loss_weight: float = 1.0,
                 reduction: str = 'mean') -> None:
        super().__init__()
        self.loss_weight = loss_weight
        self.reduction = reduction
        if class_weight is not None:
            # Config values, checked on the host: the loss also builds
            # under another default device (e.g. 'meta' for shape checks).
            weight = torch.as_tensor(
                class_weight, dtype=torch.float32, device='cpu')
            if weight.dim() != 1 or (weight
                                     < 0).any() or not (weight > 0).any():
                raise ValueError('class_weight must be a 1-D list of '
                                 'non-negative numbers, not all zero')
            self.register_buffer('class_weight', weight, persistent=False)
        else:
            self.class_weight = None

    def forward(self,
                cls_score: Tensor,
                label: Tensor,
                weight: Optional[Tensor] = None,
                avg_factor: Optional[float] = None,
                reduction_override: Optional[str] = None,
                **kwargs) -> Tensor:
        """CE of ``(N, K)`` logits and ``(N,)`` labels."""
        reduction = reduction_override or self.reduction
        if self.class_weight is None:
            loss = F.cross_entropy(cls_score, label, reduction='none')
        else:
            class_weight = self.class_weight.to(cls_score.device)
            if class_weight.numel() != cls_score.shape[-1]:
                raise ValueError(
                    f'class_weight has {class_weight.numel()} entries for '
                    f'{cls_score.shape[-1]} logits')
            kept = class_weight > 0
            logits = cls_score.float().masked_fill(~kept, float('-inf'))
            valid = kept[label]
            # A weight-0 target would give -inf; point it at a kept class
            # and zero it below.
            safe = torch.where(valid, label,
                               torch.nonzero(kept)[0].expand_as(label))
            loss = F.cross_entropy(logits, safe, reduction='none')
            loss = loss * class_weight[safe] * valid
        if weight is not None:
            weight = weight.float()
        loss = weight_reduce_loss(
            loss, weight=weight, reduction=reduction, avg_factor=avg_factor)
        return self.loss_weight * loss
