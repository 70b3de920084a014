"""CLIP's symmetric InfoNCE loss with distributed feature gathering.

"Learning Transferable Visual Models From Natural Language Supervision"
(https://arxiv.org/abs/2103.00020); the distributed variant follows
open_clip's ``ClipLoss`` (mlfoundations/open_clip, ``loss.py``): the
features of all ranks are gathered (with gradients by default here, as
open_clip's ``--gather-with-grad``; open_clip's default gathers without
them) and each rank
either computes the full ``(B_total, B_total)`` logits or, with
``local_loss``, only its own rows against all columns.
"""
from typing import List, Tuple

import torch
import torch.distributed as dist
import torch.nn.functional as F
from mmengine.dist import get_dist_info
from torch import Tensor, nn

from mmlocat.registry import MODELS

__all__ = ['CLIPContrastiveLoss', 'gather_features']


def gather_features(image: Tensor, text: Tensor, rank: int, world_size: int,
                    with_grad: bool,
                    local_loss: bool) -> Tuple[Tensor, Tensor]:
    """All ranks' features concatenated in rank order.

    With ``with_grad`` the gather is differentiable
    (``torch.distributed.nn.all_gather``: each rank's features get the
    gradients the other ranks' losses send them). Without it the gathered
    copies carry no gradient; unless ``local_loss``, this rank's own slot is
    replaced by its features so they still get one (open_clip's behaviour).
    """
    if with_grad:
        import torch.distributed.nn as dist_nn
        return (torch.cat(dist_nn.all_gather(image),
                          dim=0), torch.cat(dist_nn.all_gather(text), dim=0))
    gathered: List[List[Tensor]] = []
    for feats in (image, text):
        parts = [torch.zeros_like(feats) for _ in range(world_size)]
        dist.all_gather(parts, feats.detach())
        if not local_loss:
            parts[rank] = feats
        gathered.append(parts)
    return torch.cat(gathered[0], dim=0), torch.cat(gathered[1], dim=0)


@MODELS.register_module()
class CLIPContrastiveLoss(nn.Module):
    """Symmetric cross-entropy over image-text cosine logits.

    ``loss = (CE(s * I T^T, y) + CE(s * T I^T, y)) / 2`` with unit-norm
    features ``I``, ``T``, ``y`` the matching pairs and ``s`` the logit
    scale. Rank and world size are read at every call (mmengine's dist
    info), so one config runs on 1 or N processes.

    Args:
        local_loss: Each rank computes the loss of its own rows only
            (``(B_local, B_total)`` logits, labels offset by the rank) --
            less memory; with ``gather_with_grad`` the mean over ranks
            equals the full loss.
        gather_with_grad: Differentiable all-gather (this class's default:
            open_clip's ``--gather-with-grad`` flag, which is off by
            default). ``False`` is open_clip's default gather without
            gradients, whose DDP gradient is that of the full loss divided
            by the world size (unless ``local_loss``).
        loss_weight: Weight of the loss.
    """

    def __init__(self,
                 local_loss: bool = False,
                 gather_with_grad: bool = True,
                 loss_weight: float = 1.0) -> None:
        super().__init__()
        self.local_loss = local_loss
        self.gather_with_grad = gather_with_grad
        self.loss_weight = loss_weight

    def logits(self, image: Tensor, text: Tensor,
               logit_scale: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """``(logits_per_image, logits_per_text, labels)`` of this rank."""
        if image.shape != text.shape:
            raise ValueError(f'image features {tuple(image.shape)} and text '
                             f'features {tuple(text.shape)} differ in shape')
        rank, world_size = get_dist_info()
        labels = torch.arange(image.shape[0], device=image.device)
        if world_size == 1:
            per_image = logit_scale * image @ text.T
            return per_image, per_image.T, labels
        all_image, all_text = gather_features(image, text, rank, world_size,
                                              self.gather_with_grad,
                                              self.local_loss)
        if self.local_loss:
            return (logit_scale * image @ all_text.T,
                    logit_scale * text @ all_image.T,
                    labels + image.shape[0] * rank)
        per_image = logit_scale * all_image @ all_text.T
        labels = torch.arange(per_image.shape[0], device=image.device)
        return per_image, per_image.T, labels

    def forward(self, image: Tensor, text: Tensor,
                logit_scale: Tensor) -> Tensor:
        """The loss of unit-norm ``(B, D)`` image and text features."""
        per_image, per_text, labels = self.logits(image, text, logit_scale)
        loss = (F.cross_entropy(per_image, labels) +
                F.cross_entropy(per_text, labels)) / 2
        return self.loss_weight * loss
