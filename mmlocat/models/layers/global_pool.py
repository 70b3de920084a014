"""The global token and the patch scores of a token sequence: one module.

Every consumer (the ViT backbones' pooled output and ``forward_with_scores``,
``PatchScoreNeck``, the classifier and the analysis tools through them) pools
and scores with :class:`GlobalPool`, so the choice is spelled once:
``pooling`` (``'cls'``, ``'gap'``, ``'lazy_strike'`` with ``topk``,
``topk_ratio``, ``lazy_strike_score``, ``lazy_strike_window``), the query of
the patch scores (``score_query``) and LocAtViT's PRR (``prr_heads``).

The math: ``docs/method.md`` (sections PRR, LazyStrike, Patch score), from
"Vision Transformers Need More Than Registers" (Shi et al., CVPR 2026,
https://arxiv.org/abs/2602.22394) and "Locality-Attending Vision
Transformer" (https://arxiv.org/abs/2603.04892). Pure torch: no OpenMMLab
import.
"""
from typing import Dict, Optional, Sequence

from torch import Tensor, nn

from .lazy_strike import LazyStrikePool
from .patch_score import patch_score
from .prr import PRR

__all__ = ['GlobalPool', 'POOLINGS', 'SCORE_QUERIES']

#: The global-token choices.
POOLINGS = ('cls', 'gap', 'lazy_strike')
#: The tokens patch scores can be the cosine with.
SCORE_QUERIES = ('global', 'cls')


class GlobalPool(nn.Module):
    """Global token and patch scores of ``(B, P + h*w, C)`` tokens.

    ``P`` prefix tokens (CLS first, then registers) precede the patches;
    the tokens are the last block's output after the final norm.

    * ``pooling='cls'``: the CLS output (``tokens[:, 0]``);
    * ``pooling='gap'``: the mean of the patch tokens;
    * ``pooling='lazy_strike'``: LazyStrike of the patch tokens
      (:func:`~.lazy_strike.lazy_strike_pool`).

    With ``prr_heads``, PRR (:class:`~.prr.PRR`) refines all tokens first;
    it touches the pooled token only, never the patch tokens that are
    scored. No parameters.

    Args:
        pooling: One of :data:`POOLINGS`.
        topk: LazyStrike's patches per channel (released weights: 1).
        topk_ratio: LazyStrike's fraction of the patches instead of
            ``topk``.
        lazy_strike_score: ``'code'`` (public code) or ``'paper'``.
        lazy_strike_window: ``'code'`` (public code) or ``'centered'``.
        score_query: What the patch scores are the cosine with:
            ``'global'`` (the global token) or ``'cls'`` (the CLS output,
            what the public LaSt-ViT ``evaluate_patch_hit.py`` uses for
            every checkpoint).
        prr_heads: PRR's head count; ``None``: no PRR.
    """

    def __init__(self,
                 pooling: str = 'cls',
                 topk: Optional[int] = 1,
                 topk_ratio: Optional[float] = None,
                 lazy_strike_score: str = 'code',
                 lazy_strike_window: str = 'code',
                 score_query: str = 'global',
                 prr_heads: Optional[int] = None) -> None:
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(
                f'pooling must be one of {POOLINGS}, got {pooling!r}')
        if score_query not in SCORE_QUERIES:
            raise ValueError(f'score_query must be one of {SCORE_QUERIES}, '
                             f'got {score_query!r}')
        self.pooling = pooling
        self.score_query = score_query
        # Built whatever the pooling: the scores can report LazyStrike's
        # votes for any pooling (to compare), and it checks the options.
        self.lazy_strike = LazyStrikePool(topk, topk_ratio, lazy_strike_score,
                                          lazy_strike_window)
        self.prr = None if prr_heads is None else PRR(prr_heads)

    def refine(self, tokens: Tensor) -> Tensor:
        """The tokens the global token is pooled from (PRR if on)."""
        return tokens if self.prr is None else self.prr(tokens)

    def _check(self, tokens: Tensor, num_prefix_tokens: int,
               has_cls: Optional[bool], names: Dict[str, str]) -> None:
        if not isinstance(tokens, Tensor) or tokens.dim() != 3:
            shape = tuple(tokens.shape) if isinstance(tokens,
                                                      Tensor) else type(tokens)
            raise ValueError(f'GlobalPool expects (B, L, C) tokens, got '
                             f'{shape}')
        if not 0 <= num_prefix_tokens < tokens.shape[1]:
            raise ValueError(
                f'num_prefix_tokens={num_prefix_tokens} leaves no patch '
                f'token in a sequence of {tokens.shape[1]}')
        if has_cls is None:
            has_cls = num_prefix_tokens > 0
        for name, value in names.items():
            if value == 'cls' and not has_cls:
                raise ValueError(
                    f'{name}={value!r} needs a CLS token (the first prefix '
                    'token); these tokens have none')
        if has_cls and num_prefix_tokens < 1:
            raise ValueError('has_cls=True needs num_prefix_tokens >= 1')

    def _pool(self,
              tokens: Tensor,
              num_prefix_tokens: int,
              check_finite: bool,
              lazy: Optional[tuple] = None) -> Tensor:
        if self.pooling == 'cls':
            return tokens[:, 0]
        patches = tokens[:, num_prefix_tokens:]
        if self.pooling == 'gap':
            return patches.mean(dim=1)
        if lazy is not None:
            return lazy[0]
        return self.lazy_strike(patches, check_finite=check_finite).pooled

    def forward(self,
                tokens: Tensor,
                num_prefix_tokens: int,
                check_finite: bool = False,
                has_cls: Optional[bool] = None) -> Tensor:
        """The ``(B, C)`` global token.

        Args:
            tokens: ``(B, P + N, C)`` tokens.
            num_prefix_tokens: ``P``.
            check_finite: Raise on NaN / inf in LazyStrike (the caller's
                decision, :func:`~.finite.finite_checks_on`).
            has_cls: Whether the first prefix token is a CLS token;
                ``None``: whenever there is a prefix token (registers
                without CLS need ``False``).
        """
        self._check(tokens, num_prefix_tokens, has_cls,
                    dict(pooling=self.pooling))
        return self._pool(self.refine(tokens), num_prefix_tokens, check_finite)

    def scores(self,
               tokens: Tensor,
               hw: Sequence[int],
               num_prefix_tokens: int,
               check_finite: bool = False,
               votes: Optional[bool] = None,
               has_cls: Optional[bool] = None) -> Dict[str, Optional[Tensor]]:
        """Global token, patch scores and LazyStrike votes.

        Args:
            tokens: ``(B, P + h*w, C)`` final-norm tokens.
            hw: The patch grid ``(h, w)``.
            num_prefix_tokens: ``P``.
            check_finite: As in :meth:`forward` (also the scores).
            votes: Return LazyStrike's votes; ``None``: only when LazyStrike
                pools (then at no extra cost).
            has_cls: As in :meth:`forward`.

        Returns:
            ``global_token`` ``(B, C)`` (as :meth:`forward`),
            ``patch_score`` ``(B, 1, h, w)`` (float32 cosine of each patch
            token with the ``score_query`` token) and ``vote_map``
            ``(B, 1, h, w)`` (float32 vote counts over the patch tokens
            that are scored, i.e. before PRR) or None.
        """
        self._check(tokens, num_prefix_tokens, has_cls,
                    dict(pooling=self.pooling, score_query=self.score_query))
        batch, length = tokens.shape[:2]
        h, w = (int(s) for s in hw)
        if h * w != length - num_prefix_tokens:
            raise ValueError(
                f'grid {(h, w)} does not match {length - num_prefix_tokens} '
                f'patch tokens ({length} tokens, {num_prefix_tokens} prefix)')
        patches = tokens[:, num_prefix_tokens:]
        if votes is None:
            votes = self.pooling == 'lazy_strike'
        lazy = (
            self.lazy_strike(patches, check_finite=check_finite)
            if votes else None)
        # LazyStrike's pooled vector is reused unless PRR changes the tokens
        pooled = self._pool(
            self.refine(tokens), num_prefix_tokens, check_finite,
            lazy if self.prr is None else None)
        query = tokens[:, 0] if self.score_query == 'cls' else pooled
        score = patch_score(patches, query, check_finite=check_finite)
        return dict(
            global_token=pooled,
            patch_score=score.reshape(batch, 1, h, w),
            vote_map=None if lazy is None else lazy[1].reshape(batch, 1, h, w))

    def extra_repr(self) -> str:
        return f'pooling={self.pooling!r}, score_query={self.score_query!r}'
