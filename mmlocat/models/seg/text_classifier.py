"""The text classifier of zero-shot segmentation: query names -> classes.

Per pixel, the cosine of a unit-norm patch feature with each query name's
text embedding; after the cosines are at the image size, SCLIP's rule
(github wangf3014/SCLIP, ``clip_segmentor.py``, ``postprocess_result``,
with its CSA switched off): scale the cosines by the logit scale, softmax
over *all* query names, give each class the largest probability of its
names, take the argmax, and send pixels whose largest class probability is
below ``prob_thd`` to class 0 (the background). mmlocat's earlier rule is
an option: a constant ``bg_thresh`` channel in front of the object
classes' probabilities.
"""
from typing import List, Optional, Sequence

import torch
from torch import Tensor, nn

__all__ = ['ZeroShotTextClassifier']


class ZeroShotTextClassifier(nn.Module):
    """Query-name embeddings, their classes and the merge rule.

    It is the zero-shot segmentor's ``decode_head`` (what mmseg's tools
    read ``num_classes`` from); it holds no parameters.

    Args:
        embeddings: ``(Q, D)`` unit-norm text embeddings, one per query.
        query_class: The class index of each query.
        classes: The embedding file's classes in label order.
        logit_scale: Multiplier of the cosines before the softmax.
        prob_thd: Pixels whose largest class probability is below it
            become class 0 (SCLIP's ``prob_thd``; 0 disables).
        bg_thresh: mmlocat's constant background channel (an option):
            label 0 is a background class that is not in ``classes`` and
            wins where no class reaches this probability.
    """

    def __init__(self,
                 embeddings: Tensor,
                 query_class: Sequence[int],
                 classes: Sequence[str],
                 logit_scale: float,
                 prob_thd: float = 0.,
                 bg_thresh: Optional[float] = None) -> None:
        super().__init__()
        self.register_buffer('embeddings', embeddings, persistent=False)
        self.register_buffer(
            'query_class',
            torch.as_tensor(list(query_class), dtype=torch.long),
            persistent=False)
        self.classes: List[str] = list(classes)
        self.logit_scale = float(logit_scale)
        self.prob_thd = float(prob_thd)
        self.bg_thresh = bg_thresh
        self.num_queries = len(query_class)
        self.num_classes = len(self.classes) + (bg_thresh is not None)
        # SCLIP merges only when some class has several names
        self.merges = list(query_class) != list(range(len(self.classes)))

    def forward(self, feats: Tensor) -> Tensor:
        """``(B, Q, h, w)`` cosines of unit-norm ``(B, D, h, w)`` features
        with every query."""
        return torch.einsum('bdhw,qd->bqhw', feats,
                            self.embeddings.to(feats.dtype))

    def class_probs(self, cosines: Tensor) -> Tensor:
        """``(..., Q, H, W)`` cosines -> ``(..., num_classes, H, W)`` class
        probabilities (with the constant background channel first when
        ``bg_thresh`` is set)."""
        probs = (cosines * self.logit_scale).softmax(dim=-3)
        if self.merges:
            shape = list(probs.shape)
            shape[-3] = len(self.classes)
            index = self.query_class.view(-1, 1, 1).expand_as(probs)
            probs = probs.new_zeros(shape).scatter_reduce(
                -3, index, probs, 'amax', include_self=False)
        if self.bg_thresh is not None:
            background = probs.new_full(probs[..., :1, :, :].shape,
                                        self.bg_thresh)
            probs = torch.cat([background, probs], dim=-3)
        return probs

    def labels(self, probs: Tensor) -> Tensor:
        """Argmax over classes; class 0 below ``prob_thd``."""
        labels = probs.argmax(dim=-3, keepdim=True)  # ties: the first
        if self.prob_thd > 0:
            labels[probs.max(dim=-3, keepdim=True).values < self.prob_thd] = 0
        return labels
