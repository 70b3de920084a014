"""An image classifier whose predictions carry patch-score maps.

Patch scores are from "Vision Transformers Need More Than Registers"
(Shi et al., CVPR 2026, https://arxiv.org/abs/2602.22394),
``docs/method.md#patch-score``: ``s_i = cos(x_i, q)`` of every final-norm
patch token with the global token. The maps ride on the predicted
``DataSample`` so that the PiB and CorLoc metrics and the visualisation tool
can read them.
"""
from typing import Dict, List, Optional, Tuple

from mmpretrain.models.classifiers import ImageClassifier
from mmpretrain.structures import DataSample
from torch import Tensor

from mmlocat.registry import MODELS
from mmlocat.utils.init_info import SummarisedInitInfo

__all__ = ['PatchScoreClassifier']


@MODELS.register_module()
class PatchScoreClassifier(SummarisedInitInfo, ImageClassifier):
    """``ImageClassifier`` that attaches patch scores to its predictions.

    ``predict`` sets two fields on every returned ``DataSample``:
    ``patch_score`` (the ``(h, w)`` cosine map) and, when given,
    ``vote_map`` (``(h, w)`` LazyStrike vote counts). The scores come from
    one interface, ``forward_with_scores``, of:

    1. the neck (``mmlocat.PatchScoreNeck``), whatever the backbone: a
       plain mmpretrain ``VisionTransformer`` with ``out_type='raw'`` and
       ``pooling='cls'`` (its CLS output), a CNN with ``pooling='gap'``
       and ``mode='classification'`` (the cosine with the global average
       pool, which the head then receives as from ``GlobalAveragePooling``);
    2. else the backbone (every mmlocat ViT: ``LaStViT``, ``LocAtViT``,
       ``CLIPViT``, ``EVA02CLIPViT``); with ``out_type='cls_token'`` on the
       last layer only, the classification features are taken from the
       same pass.

    Arguments are those of mmpretrain's ``ImageClassifier``; ``head`` may
    be None for score-only evaluation (``predict`` then returns the input
    data samples, or new ones, with the maps attached).
    """

    def extract_feat_with_scores(self, inputs: Tensor) -> Tuple[tuple, Dict]:
        """Neck output (as ``extract_feat``) and the score dict.

        Returns:
            ``(feats, scores)`` where ``scores`` holds ``patch_score``
            ``(B, 1, h, w)`` and optionally ``vote_map`` ``(B, 1, h, w)``.

        Raises:
            TypeError: If neither the neck nor the backbone gives scores.
        """
        if hasattr(self.neck, 'forward_with_scores'):
            scores = self.neck.forward_with_scores(self.backbone(inputs))
            return scores['outs'], scores
        if not hasattr(self.backbone, 'forward_with_scores'):
            raise TypeError(
                f'cannot compute patch scores for '
                f'{type(self.backbone).__name__}: it has no '
                'forward_with_scores; use an mmlocat ViT (e.g. '
                "mmlocat.LaStViT(pooling='cls') for a plain ViT) or add "
                "neck=dict(type='mmlocat.PatchScoreNeck', "
                "mode='classification', ...) with pooling='cls' on an "
                "mmpretrain ViT's out_type='raw' tokens or pooling='gap' "
                'on a CNN map')
        scores = self.backbone.forward_with_scores(inputs)
        if self._features_in_scores():
            feats = (scores['embedding'], )
        else:
            feats = self.backbone(inputs)
        if self.with_neck:
            feats = self.neck(feats)
        return feats, scores

    def _features_in_scores(self) -> bool:
        """Whether ``forward_with_scores`` already gives the cls features."""
        backbone = self.backbone
        return (backbone.out_type == 'cls_token'
                and list(backbone.out_indices) == [backbone.num_layers - 1])

    def predict(self,
                inputs: Tensor,
                data_samples: Optional[List[DataSample]] = None,
                **kwargs) -> List[DataSample]:
        """Predict labels and attach ``patch_score`` / ``vote_map``."""
        feats, scores = self.extract_feat_with_scores(inputs)
        if self.with_head:
            preds = self.head.predict(feats, data_samples, **kwargs)
        else:  # score-only models, e.g. a DINO backbone for CorLoc
            preds = [
                sample if sample is not None else DataSample()
                for sample in (data_samples or [None] * inputs.shape[0])
            ]
        vote_map = scores.get('vote_map')
        for i, sample in enumerate(preds):
            sample.set_field(scores['patch_score'][i, 0].detach(),
                             'patch_score')
            if vote_map is not None:
                sample.set_field(vote_map[i, 0].detach(), 'vote_map')
        return preds
