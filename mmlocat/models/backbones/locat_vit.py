"""LocAtViT: a ViT with Gaussian-augmented attention and PRR.

`Locality-Attending Vision Transformer <https://arxiv.org/abs/2603.04892>`_
(Hajimiri et al., ICLR 2026). Follows the authors' timm-based public code
(sinahmr/LocAtViT), which the published checkpoints were trained with:
token layout ``[CLS, registers, patches]``, position embeddings over all of
them, timm-style resampling of the patch part at other input sizes.
Built on mmpretrain's :class:`VisionTransformer` the way ``ViTEVA02`` is.
"""
from typing import Dict, Optional, Sequence, Tuple, Union

import torch
from torch import nn

from mmlocat.registry import MODELS
from mmlocat.utils.pretrained import is_pretrained_cfg
from .locat_layers import LocAtEncoderLayer, build_gaug_cfg
from .vit_archs import VIT_ARCHS
from .vit_base import TokenLoopViT
from .vit_init import names_scheme

__all__ = ['LocAtViT']

# 's'/'small' meant DeiT-S here before; mmpretrain's is another network.
REFUSED_ARCHS = ('s', 'small')


@MODELS.register_module()
class LocAtViT(TokenLoopViT):
    """Locality-Attending Vision Transformer.

    A plain ViT plus GAug (a learnable Gaussian bias on the attention
    logits of every block) and PRR (a parameter-free self-attention before
    the classification pooling).

    Args:
        arch: An alias of the shared table
            (:data:`~mmlocat.models.backbones.vit_archs.VIT_ARCHS`:
            mmpretrain's, plus 't'/'tiny' = 'deit-tiny'), e.g. 't' (the
            paper's LocAtViT-T), 'deit-small' (LocAtViT-S), 'b'/'base'
            (LocAtViT-B), or a dict with ``embed_dims``, ``num_layers``,
            ``num_heads`` and ``feedforward_channels``. 's'/'small' is
            refused with a message (it meant DeiT-S here before but is
            mmpretrain's 768-d, 8-layer ViT-S elsewhere).
        img_size: Training input size; fixes the position-embedding grid
            and the GAug constants (variance cap, eps, clamp).
        patch_size: Patch size.
        in_channels: Input channels.
        out_indices: Blocks whose output is returned, in increasing order
            (negative: from the end; duplicates and unsorted lists are
            refused).
        out_type: 'cls_token', 'avg_featmap', 'featmap' or 'raw'. Defaults
            to 'cls_token' with CLS pooling and 'avg_featmap' with GAP.
            PRR runs for the pooled outputs only; 'featmap' / 'raw' are the
            block outputs (after the final norm for the last block).
        pooling: 'cls' (CLS token, final LayerNorm), 'gap' (no CLS token,
            no final norm, LayerNorm after averaging the patch tokens, as
            timm's ``global_pool='avg'``) or 'lazy_strike' (LaSt-ViT's
            global token; CLS token kept, final LayerNorm). ``None``
            (default): 'cls', or 'gap' with ``with_cls_token=False`` (then
            with the host's ``final_norm=True`` default). See
            :class:`~mmlocat.models.layers.GlobalPool`.
        topk: LazyStrike's patches per channel (``pooling='lazy_strike'``).
        topk_ratio: LazyStrike's fraction of the patches instead of
            ``topk``.
        lazy_strike_score: ``'code'`` or ``'paper'``.
        lazy_strike_window: ``'code'`` or ``'centered'``.
        score_query: The token the patch scores of
            :meth:`~.vit_base.TokenLoopViT.forward_with_scores` are the
            cosine with: ``'global'`` or ``'cls'`` (the CLS output).
        gaug: Gaussian-augmented attention in every block.
        prr: Patch representation refinement before pooling (the pooled
            outputs and the global token; the scored patch tokens are the
            block outputs).
        gaug_cfg: GAug options, a dict with any of ``clamp`` (clamp the
            distance terms; turn off to visualise), ``impl`` (the kernel,
            all exact: 'auto' (default: the fastest for the device and grad
            mode), 'dense' (the reference, full N x N bias), 'chunked'
            (query blocks, O(block * N) memory) or 'flex' (FlexAttention; no
            backward on CPU)), ``precision`` ('fp32', default and stable, or
            'public': in the autocast dtype, e.g. fp16, as the public code
            trained its checkpoints; dense kernel) and ``fast`` (the public
            code's approximate fast GAug, 2x2-pooled queries in training
            when the training grid has >= 32 rows; opt-in; dense kernel
            while active). See
            :data:`~mmlocat.models.backbones.locat_layers.GAUG_CFG_DEFAULTS`.
        num_register_tokens: Register tokens after the CLS token.
        use_pos_embed: Learned absolute position embedding (``False`` is the
            paper's no-position-embedding ablation).
        drop_rate: Dropout rate.
        attn_drop_rate: Dropout on attention weights.
        drop_path_rate: Stochastic depth rate (linear over the blocks).
        qkv_bias: Bias in the qkv projections.
        norm_cfg: Norm layers.
        final_norm: Final LayerNorm; defaults to ``pooling != 'gap'``.
        with_cls_token: mmpretrain's argument: ``False`` builds no CLS
            token (``pooling='gap'``); ``None`` follows ``pooling``.
        frozen_stages: Freeze the stem and this many blocks (-1: none;
            at most the number of blocks); they stay in eval mode.
        frozen: Freeze every parameter and stay in eval mode (a frozen
            backbone, e.g. under F-ViT).
        interpolate_mode: Position-embedding resampling mode.
        pos_embed_cfg: Position-embedding resampling at other grids (and of
            a checkpoint's on loading), see
            :func:`~mmlocat.models.backbones.pos_embed.build_pos_embed_cfg`;
            default ``dict(resample='timm', antialias=True)``, the public
            code's. ``dict(resample='timm', antialias=False)`` computes
            what the host's resize does.
        layer_scale_init_value: Layer scale of every block, as the host
            (0: none).
        patch_cfg: Extra patch-embedding config. Inputs that are not a
            multiple of the patch size are padded (mmcv ``PatchEmbed``).
        layer_cfgs: Extra config for every (dict) or each (list) block.
        pre_norm: LayerNorm before the blocks (and a bias-free patch
            embedding), as the host.
        with_cp: Activation checkpointing of every block in training
            (:meth:`~.vit_base.TokenLoopViT.run_block`): less memory, one
            more forward per block in the backward; same outputs and
            gradients.
        pretrained: Checkpoint path injected by mmseg; becomes
            ``init_cfg=dict(type='Pretrained', checkpoint=pretrained)``.
        init_cfg: Initialisation config. A ``Pretrained`` checkpoint is
            loaded strictly (:func:`mmlocat.utils.pretrained.load_pretrained`):
            missing, unexpected or mis-shaped keys raise, except the GAug
            parameters (``attn.gaug.*``) when the checkpoint has none (a
            plain ViT: GAug starts fresh). Converted checkpoints need
            ``prefix='backbone.'``.

    Every argument of mmpretrain's ``VisionTransformer`` is accepted with
    its meaning; GAug, PRR, ``pooling``, registers, ``use_pos_embed`` and
    ``pos_embed_cfg`` are the additions.
    """
    REFUSED_ARCHS = REFUSED_ARCHS
    arch_zoo = {k: v for k, v in VIT_ARCHS.items() if k not in REFUSED_ARCHS}
    NEW_KEY_GROUPS = ('attn.gaug.', )
    DEFAULT_POS_EMBED_CFG = dict(resample='timm', antialias=True)

    def __init__(self,
                 arch: Union[str, dict] = 'base',
                 img_size: Union[int, Sequence[int]] = 224,
                 patch_size: int = 16,
                 in_channels: int = 3,
                 out_indices: Union[int, Sequence[int]] = -1,
                 out_type: Optional[str] = None,
                 pooling: Optional[str] = None,
                 topk: Optional[int] = 1,
                 topk_ratio: Optional[float] = None,
                 lazy_strike_score: str = 'code',
                 lazy_strike_window: str = 'code',
                 score_query: str = 'global',
                 gaug: bool = True,
                 prr: bool = True,
                 gaug_cfg: Optional[dict] = None,
                 num_register_tokens: int = 0,
                 use_pos_embed: bool = True,
                 drop_rate: float = 0.,
                 attn_drop_rate: float = 0.,
                 drop_path_rate: float = 0.,
                 qkv_bias: bool = True,
                 norm_cfg: dict = dict(type='LN', eps=1e-6),
                 final_norm: Optional[bool] = None,
                 with_cls_token: Optional[bool] = None,
                 frozen_stages: int = -1,
                 frozen: bool = False,
                 interpolate_mode: str = 'bicubic',
                 pos_embed_cfg: Optional[dict] = None,
                 layer_scale_init_value: float = 0.,
                 patch_cfg: dict = dict(),
                 layer_cfgs: Union[dict, Sequence[dict]] = dict(),
                 pre_norm: bool = False,
                 with_cp: bool = False,
                 pretrained: Optional[str] = None,
                 init_cfg: Optional[Union[dict, list]] = None) -> None:
        gaug_cfg = build_gaug_cfg(gaug_cfg)
        if pooling is None:
            pooling = 'gap' if with_cls_token is False else 'cls'
        elif final_norm is None:
            final_norm = pooling != 'gap'  # timm's global_pool='avg'
        has_cls = pooling != 'gap'
        if with_cls_token is not None and with_cls_token != has_cls:
            raise ValueError(
                f'with_cls_token={with_cls_token} contradicts '
                f"pooling={pooling!r} ('gap' builds no CLS token, 'cls' and "
                "'lazy_strike' keep one)")
        if out_type is None:
            out_type = 'avg_featmap' if pooling == 'gap' else 'cls_token'
        if pooling == 'gap' and out_type == 'cls_token':
            raise ValueError(
                "out_type='cls_token' needs a CLS token (with_cls_token must "
                "be True when out_type='cls_token'); without one use "
                "out_type='avg_featmap'")
        if num_register_tokens < 0:
            raise ValueError('num_register_tokens must be >= 0, got '
                             f'{num_register_tokens}')
        super().__init__(
            arch=arch,
            img_size=img_size,
            patch_size=patch_size,
            in_channels=in_channels,
            out_indices=out_indices,
            drop_rate=drop_rate,
            drop_path_rate=drop_path_rate,
            qkv_bias=qkv_bias,
            norm_cfg=norm_cfg,
            final_norm=True if final_norm is None else final_norm,
            out_type=out_type,
            with_cls_token=has_cls,
            pooling=pooling,
            topk=topk,
            topk_ratio=topk_ratio,
            lazy_strike_score=lazy_strike_score,
            lazy_strike_window=lazy_strike_window,
            score_query=score_query,
            prr=prr,
            frozen_stages=frozen_stages,
            frozen=frozen,
            with_cp=with_cp,
            pretrained=pretrained,
            interpolate_mode=interpolate_mode,
            pos_embed_cfg=pos_embed_cfg,
            layer_scale_init_value=layer_scale_init_value,
            patch_cfg=patch_cfg,
            pre_norm=pre_norm,
            init_cfg=init_cfg)
        self.num_heads = self.arch_settings['num_heads']
        self.num_register_tokens = num_register_tokens
        self.num_extra_tokens = int(has_cls) + num_register_tokens

        self.reg_token = nn.Parameter(
            torch.zeros(1, num_register_tokens,
                        self.embed_dims)) if num_register_tokens else None
        num_patches = self.patch_resolution[0] * self.patch_resolution[1]
        # Replaces the parent's: it also covers the register tokens (timm).
        self.pos_embed = nn.Parameter(
            torch.zeros(1, self.num_extra_tokens + num_patches,
                        self.embed_dims)) if use_pos_embed else None

        self.replace_layers(
            LocAtEncoderLayer,
            layer_cfgs,
            drop_path_rate,
            grid_size=self.patch_resolution,
            num_prefix_tokens=self.num_extra_tokens,
            gaug=gaug,
            gaug_cfg=gaug_cfg,
            layer_scale_init_value=layer_scale_init_value,
            drop_rate=drop_rate,
            attn_drop_rate=attn_drop_rate,
            qkv_bias=qkv_bias,
            norm_cfg=norm_cfg)

    def init_weights(self) -> None:
        """As the base (the public code's scheme with
        ``init_cfg=dict(type='mmlocat.TimmViTInit')``); the host's random
        initialisation draws the register tokens from N(0, 1e-6)."""
        super().init_weights()
        if (self.reg_token is not None and not is_pretrained_cfg(self.init_cfg)
                and not names_scheme(self.init_cfg)):
            nn.init.normal_(self.reg_token, std=1e-6)

    def expected_unused_keys(self) -> Dict[str, str]:
        """As the parent, plus the CLS token with ``pooling='gap'`` (its
        position embedding is dropped on load)."""
        unused = super().expected_unused_keys()
        if self.cls_token is None:
            unused['cls_token'] = "pooling='gap' builds no CLS token"
        return unused

    def get_layer_depth(self,
                        param_name: str,
                        prefix: str = '') -> Tuple[int, int]:
        """Layer depth for layer-wise lr decay (GAug: its block's depth)."""
        if param_name == prefix + 'reg_token':
            return 0, self.num_layers + 2
        return super().get_layer_depth(param_name, prefix)

    def prefix_tokens(self) -> Sequence[torch.Tensor]:
        """CLS (unless ``pooling='gap'``), then the registers."""
        return [t for t in (self.cls_token, self.reg_token) if t is not None]

    def layer_args(self, hw: Tuple[int, int], tokens: torch.Tensor) -> tuple:
        """GAug's blocks receive the patch grid."""
        return (hw, )
