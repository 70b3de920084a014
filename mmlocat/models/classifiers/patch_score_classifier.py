"""An image classifier whose predictions carry patch-score maps.

Patch scores are from "Vision Transformers Need More Than Registers"
(Shi et al., CVPR 2026, https://arxiv.org/abs/2602.22394),
``docs/method.md#patch-score``: ``s_i = cos(x_i, q)`` of every final-norm
patch token with the global token. The maps ride on the predicted
``DataSample`` so that the PiB and CorLoc metrics and the visualisation tool
can read them.
"""
from contextlib import contextmanager
from typing import Dict, Iterator, List, Optional, Tuple

from mmpretrain.models.classifiers import ImageClassifier
from mmpretrain.structures import DataSample
from torch import Tensor, nn

from mmlocat.registry import MODELS
from ..layers import patch_score

__all__ = ['PatchScoreClassifier']


@contextmanager
def _capture_output(module: nn.Module, store: List) -> Iterator[None]:
    """Record the outputs of ``module`` during one forward, then unhook."""
    handle = module.register_forward_hook(
        lambda _m, _inp, out: store.append(out))
    try:
        yield
    finally:
        handle.remove()


@MODELS.register_module()
class PatchScoreClassifier(ImageClassifier):
    """``ImageClassifier`` that attaches patch scores to its predictions.

    ``predict`` sets two fields on every returned ``DataSample``:
    ``patch_score`` (the ``(h, w)`` cosine map) and, when LazyStrike pools,
    ``vote_map`` (``(h, w)`` vote counts). The scores come from, in order:

    1. the neck's ``forward_with_scores`` (e.g. ``mmlocat.PatchScoreNeck``);
    2. the backbone's ``forward_with_scores`` (``mmlocat.LaStViT``,
       ``mmlocat.CLIPViT``); with ``out_type='cls_token'`` on the last layer
       only, the classification features are taken from the same pass;
    3. a plain mmpretrain ``VisionTransformer``: the final-norm patch tokens
       and the CLS output of the same forward pass (read with temporary
       forward hooks; GAP when the ViT has no CLS token) — the paper's
       plain-ViT baseline;
    4. a backbone whose last output is a ``(B, C, h, w)`` map (a CNN): the
       cosine with its global average pool.

    Arguments are those of mmpretrain's ``ImageClassifier``; ``head`` may
    be None for score-only evaluation (``predict`` then returns the input
    data samples, or new ones, with the maps attached).
    """

    def extract_feat_with_scores(self, inputs: Tensor) -> Tuple[tuple, Dict]:
        """Neck output (as ``extract_feat``) and the score dict.

        Returns:
            ``(feats, scores)`` where ``scores`` holds ``patch_score``
            ``(B, 1, h, w)`` and optionally ``vote_map`` ``(B, 1, h, w)``.
        """
        neck_scores = getattr(self.neck, 'forward_with_scores', None)
        if neck_scores is not None:
            scores = neck_scores(self.backbone(inputs))
            return scores['outs'], scores
        backbone_scores = getattr(self.backbone, 'forward_with_scores', None)
        if backbone_scores is not None:
            scores = backbone_scores(inputs)
            if self._features_in_scores():
                feats = (self.backbone.embed_global(scores['global_token']), )
            else:
                feats = self.backbone(inputs)
        else:
            feats, scores = self._plain_scores(inputs)
        if self.with_neck:
            feats = self.neck(feats)
        return feats, scores

    def _features_in_scores(self) -> bool:
        """Whether ``forward_with_scores`` already gives the cls features."""
        backbone = self.backbone
        return (getattr(backbone, 'out_type', None) == 'cls_token'
                and hasattr(backbone, 'embed_global')
                and list(backbone.out_indices) == [backbone.num_layers - 1])

    def _plain_scores(self, inputs: Tensor) -> Tuple[tuple, Dict]:
        """Scores of a backbone without ``forward_with_scores``."""
        backbone = self.backbone
        is_vit = all(
            hasattr(backbone, name)
            for name in ('patch_embed', 'layers', 'num_extra_tokens'))
        if not is_vit:
            feats = backbone(inputs)
            last = feats[-1] if isinstance(feats, (tuple, list)) else feats
            if not isinstance(last, Tensor) or last.dim() != 4:
                raise TypeError(
                    f'cannot compute patch scores for {type(backbone)}: it '
                    'has no forward_with_scores, is not an mmpretrain ViT '
                    'and its last output is not a (B, C, h, w) map; add '
                    'mmlocat.PatchScoreNeck as the neck')
            tokens = last.flatten(2).transpose(1, 2)
            score = patch_score(tokens, tokens.mean(dim=1))
            return feats, dict(
                patch_score=score.reshape(last.shape[0], 1, *last.shape[-2:]))
        grids: List = []
        finals: List = []
        final = (
            backbone.ln1
            if getattr(backbone, 'final_norm', False) else backbone.layers[-1])
        with _capture_output(backbone.patch_embed, grids), \
                _capture_output(final, finals):
            feats = backbone(inputs)
        tokens = finals[-1]
        hw = tuple(grids[-1][1])
        patches = tokens[:, backbone.num_extra_tokens:]
        if backbone.num_extra_tokens > 0:
            query = tokens[:, 0]  # the CLS output
        else:
            query = patches.mean(dim=1)
        score = patch_score(patches, query)
        return feats, dict(patch_score=score.reshape(tokens.shape[0], 1, *hw))

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
