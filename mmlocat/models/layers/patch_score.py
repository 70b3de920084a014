"""Patch score: cosine similarity of each patch token with a global token.

"Vision Transformers Need More Than Registers" (CVPR 2026),
https://arxiv.org/abs/2602.22394, ``docs/method.md#patch-score``:
``s_i = cos(x_i, q)`` with ``x_i`` the final-norm patch tokens and ``q`` the
LazyStrike token (or the CLS output of a plain ViT, GAP for CNNs). Pure
torch: no OpenMMLab import.
"""
from torch import Tensor

from .finite import refuse_nonfinite

__all__ = ['patch_score']


def patch_score(tokens: Tensor,
                global_token: Tensor,
                eps: float = 1e-6,
                check_finite: bool = False) -> Tensor:
    """Cosine similarity of every patch token with the global token.

    Computed and returned in float32, whatever the dtype of ``tokens``:
    squared norms of half-precision 768-d tokens can overflow, and scores
    rounded to bf16 (8 significant bits) tie, so an argmax over them would
    pick by position. Each vector is divided by ``max(norm, eps)``, so an
    all-zero token or global token scores 0 instead of NaN.

    Args:
        tokens: ``(B, N, D)`` patch tokens.
        global_token: ``(B, D)`` global token.
        eps: Lower bound of the norms.
        check_finite: Raise on NaN / inf in the inputs or the scores (one
            host sync): the caller's decision, see
            :func:`~.finite.finite_checks_on`. Off by default.

    Returns:
        ``(B, N)`` float32 scores in ``[-1, 1]``.
    """
    if not isinstance(tokens, Tensor) or tokens.dim() != 3:
        shape = tuple(tokens.shape) if isinstance(tokens,
                                                  Tensor) else type(tokens)
        raise ValueError(f'tokens must be (B, N, D), got {shape}')
    if not isinstance(global_token, Tensor) or global_token.dim() != 2:
        shape = tuple(global_token.shape) if isinstance(
            global_token, Tensor) else type(global_token)
        raise ValueError(f'global_token must be (B, D), got {shape}')
    if (global_token.shape[0] != tokens.shape[0]
            or global_token.shape[1] != tokens.shape[2]):
        raise ValueError(
            f'tokens {tuple(tokens.shape)} and global_token '
            f'{tuple(global_token.shape)} disagree on batch or channels')
    if not eps > 0:
        raise ValueError(f'eps must be positive, got {eps}')
    t = tokens.float()
    q = global_token.float()
    t = t / t.norm(dim=-1, keepdim=True).clamp_min(eps)
    q = q / q.norm(dim=-1, keepdim=True).clamp_min(eps)
    score = (t * q.unsqueeze(1)).sum(dim=-1)
    if check_finite:
        refuse_nonfinite('patch_score',
                         dict(tokens=tokens, global_token=global_token),
                         dict(score=score))
    return score
