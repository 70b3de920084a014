"""LaSt-ViT: a Vision Transformer whose global token is LazyStrike pooling.

"Vision Transformers Need More Than Registers" (Shi, Yu, Yang, CVPR 2026),
https://arxiv.org/abs/2602.22394; public code ChengShiest/LAST-ViT. Built on
mmpretrain's :class:`~mmpretrain.models.backbones.VisionTransformer`, so the
parameter names (``layers.i.ln1``, ``attn.qkv``, ``ffn.layers.*``) and
position-embedding resizing are the parent's and the model has no new
parameters: only the global token changes.
"""
from typing import Dict, Optional, Union

from torch import Tensor

from mmlocat.registry import MODELS
from ..layers import LazyStrikePool, patch_score
from .vit_archs import VIT_ARCHS
from .vit_base import TokenLoopViT

__all__ = ['LaStViT']


@MODELS.register_module()
class LaStViT(TokenLoopViT):
    """Vision Transformer with LazyStrike pooling (LaSt-ViT).

    The CLS input token stays in the sequence, but with
    ``pooling='lazy_strike'`` its output is unused: the global token is the
    LazyStrike pooling of the final-norm patch tokens. ``out_type='cls_token'``
    returns that global token, so mmpretrain's ``VisionTransformerClsHead``
    works unchanged; ``'featmap'``, ``'raw'`` and ``'avg_featmap'`` behave as
    in the parent.

    Args:
        arch: An alias of the shared table
            (:data:`~mmlocat.models.backbones.vit_archs.VIT_ARCHS`: the
            parent's, e.g. ``'b'``, ``'s'`` (ViT-S, 768-d, 8 layers),
            ``'deit-small'``, plus ``'t'`` = ``'deit-tiny'``) or a dict
            with ``embed_dims``, ``num_layers``, ``num_heads`` and
            ``feedforward_channels``.
        pooling: ``'lazy_strike'`` or ``'cls'`` (the plain ViT baseline with
            the same class, for A/B comparisons).
        topk: Patches kept per channel by LazyStrike (released supervised
            weights: 1).
        topk_ratio: Fraction of the patches kept instead of ``topk``.
        lazy_strike_score: ``'code'`` (released weights) or ``'paper'``.
        lazy_strike_window: ``'code'`` (released weights) or ``'centered'``.
        score_query: Token the patch scores of :meth:`forward_with_scores`
            are the cosine with: ``'global'`` (the global token, default)
            or ``'cls'`` (the CLS output, what the public
            ``evaluate_patch_hit.py`` uses for every checkpoint).
        **kwargs: Arguments of :class:`~.vit_base.TokenLoopViT`
            (``frozen``, ``frozen_stages``, ``with_cp``, ``pretrained``,
            ``pos_embed_cfg``: default ``dict(resample='host')``,
            mmpretrain's size-based resize; ``dict(resample='dino')`` is
            DINO's ``interpolate_pos_encoding``, for DINO weights at full
            resolution (CorLoc), see :mod:`.pos_embed`;
            ``init_cfg``: a ``Pretrained`` checkpoint is loaded strictly, see
            :func:`mmlocat.utils.pretrained.load_pretrained`;
            ``out_indices`` must be increasing and unique) and of the host
            ``VisionTransformer``.
    """
    arch_zoo = VIT_ARCHS
    POOLINGS = ('lazy_strike', 'cls')
    SCORE_QUERIES = ('global', 'cls')

    def __init__(self,
                 arch: Union[str, dict] = 'base',
                 pooling: str = 'lazy_strike',
                 topk: Optional[int] = 1,
                 topk_ratio: Optional[float] = None,
                 lazy_strike_score: str = 'code',
                 lazy_strike_window: str = 'code',
                 score_query: str = 'global',
                 **kwargs) -> None:
        if pooling not in self.POOLINGS:
            raise ValueError(
                f'pooling must be one of {self.POOLINGS}, got {pooling!r}')
        if score_query not in self.SCORE_QUERIES:
            raise ValueError(f'score_query must be one of '
                             f'{self.SCORE_QUERIES}, got {score_query!r}')
        super().__init__(arch=arch, **kwargs)
        self.pooling = pooling
        self.score_query = score_query
        self.lazy_strike = LazyStrikePool(
            topk=topk,
            topk_ratio=topk_ratio,
            score=lazy_strike_score,
            window=lazy_strike_window)

    def _format_output(self,
                       x: Tensor,
                       hw: tuple,
                       check_finite: bool = False) -> Tensor:
        if self.out_type == 'cls_token':
            return self.embed_global(self.global_token(x, check_finite))
        return super()._format_output(x, hw)

    def global_token(self, tokens: Tensor, check_finite: bool) -> Tensor:
        """The ``(B, C)`` global token of a ``(B, L, C)`` token sequence."""
        if self.pooling == 'cls':
            return tokens[:, 0]
        return self.lazy_strike(
            tokens[:, self.num_extra_tokens:],
            check_finite=check_finite).pooled

    def embed_global(self, token: Tensor) -> Tensor:
        """Map the global token to the output space (identity here; CLIP
        projects it)."""
        return token

    def forward_with_scores(
            self,
            x: Tensor,
            check_finite: Optional[bool] = None) -> Dict[str, Tensor]:
        """Global token, patch scores and LazyStrike votes, for analysis.

        Args:
            x: ``(B, 3, H, W)`` images.

        Returns:
            A dict with ``global_token`` ``(B, C)`` (the pooled final-norm
            token, before any output projection), ``patch_score``
            ``(B, 1, h, w)`` (cosine of each final-norm patch token with the
            global token, or the CLS output with ``score_query='cls'``),
            ``vote_map`` ``(B, 1, h, w)`` (LazyStrike votes,
            computed also for ``pooling='cls'`` to compare) and ``featmap``
            ``(B, C, h, w)`` (final-norm patch tokens).
        """
        check = self.checks_finite(check_finite)
        (tokens, ), hw = self.forward_intermediates(x, [len(self.layers) - 1],
                                                    check)
        patches = tokens[:, self.num_extra_tokens:]
        result = self.lazy_strike(patches, check_finite=check)
        pooled = tokens[:, 0] if self.pooling == 'cls' else result.pooled
        query = tokens[:, 0] if self.score_query == 'cls' else pooled
        batch, _, channels = patches.shape
        score = patch_score(patches, query, check_finite=check)
        return dict(
            global_token=pooled,
            patch_score=score.reshape(batch, 1, *hw),
            vote_map=result.votes.reshape(batch, 1, *hw),
            featmap=patches.reshape(batch, *hw, channels).permute(0, 3, 1, 2))

    def get_layer_depth(self, param_name: str, prefix: str = ''):
        """Layer depth for layer-wise lr decay; ``pre_norm`` is the stem."""
        if param_name.startswith(prefix + 'pre_norm'):
            return 0, self.num_layers + 2
        return super().get_layer_depth(param_name, prefix)
