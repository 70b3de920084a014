"""LaSt-ViT: a Vision Transformer whose global token is LazyStrike pooling.

"Vision Transformers Need More Than Registers" (Shi, Yu, Yang, CVPR 2026),
https://arxiv.org/abs/2602.22394; public code ChengShiest/LAST-ViT. Built on
mmpretrain's :class:`~mmpretrain.models.backbones.VisionTransformer`, so the
parameter names (``layers.i.ln1``, ``attn.qkv``, ``ffn.layers.*``) and
position-embedding resizing are the parent's and the model has no new
parameters: only the global token changes.
"""
from mmlocat.registry import MODELS
from .vit_archs import VIT_ARCHS
from .vit_base import TokenLoopViT

__all__ = ['LaStViT']


@MODELS.register_module()
class LaStViT(TokenLoopViT):
    """Vision Transformer with LazyStrike pooling (LaSt-ViT).

    mmpretrain's ViT through :class:`~.vit_base.TokenLoopViT` with
    ``pooling='lazy_strike'`` by default: the CLS input token stays in the
    sequence, but its output is unused; the global token is the LazyStrike
    pooling of the final-norm patch tokens. ``out_type='cls_token'``
    returns that global token, so mmpretrain's ``VisionTransformerClsHead``
    works unchanged; ``'featmap'``, ``'raw'`` and ``'avg_featmap'`` behave as
    in the host. ``pooling='cls'`` is the plain ViT (output for output), the
    baseline of an A/B.

    Args:
        arch: An alias of the shared table
            (:data:`~mmlocat.models.backbones.vit_archs.VIT_ARCHS`: the
            host's, e.g. ``'b'``, ``'s'`` (ViT-S, 768-d, 8 layers),
            ``'deit-small'``, plus ``'t'`` = ``'deit-tiny'``) or a dict
            with ``embed_dims``, ``num_layers``, ``num_heads`` and
            ``feedforward_channels``.
        **kwargs: Arguments of :class:`~.vit_base.TokenLoopViT` (``pooling``
            and LazyStrike's ``topk``, ``topk_ratio``, ``lazy_strike_score``,
            ``lazy_strike_window``; ``score_query``; ``frozen``,
            ``frozen_stages``, ``with_cp``, ``pretrained``,
            ``pos_embed_cfg``: default ``dict(resample='host')``,
            mmpretrain's size-based resize; ``dict(resample='dino')`` is
            DINO's ``interpolate_pos_encoding``, for DINO weights at full
            resolution (CorLoc), see :mod:`.pos_embed`; ``init_cfg``: a
            ``Pretrained`` checkpoint is loaded strictly, see
            :func:`mmlocat.utils.pretrained.load_pretrained`;
            ``out_indices`` must be increasing and unique) and of the host
            ``VisionTransformer``.
    """
    arch_zoo = VIT_ARCHS
    DEFAULT_POOLING = 'lazy_strike'
