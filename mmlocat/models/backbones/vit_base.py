"""The base of mmlocat's ViT backbones: one token loop, one loading policy.

Every ViT backbone here (LocAtViT, LaStViT, CLIPViT, EVA02CLIPViT) is
mmpretrain's ``VisionTransformer`` plus :class:`TokenLoopViT`:

* one token loop, timm's ``forward_intermediates`` idea:
  :meth:`TokenLoopViT.forward_intermediates` embeds the image and runs the
  blocks once, keeping the tokens after the requested blocks (the final norm
  after the last). The backbones differ only in what they override: the
  prefix tokens (:meth:`~TokenLoopViT.prefix_tokens`), the position
  embedding at the input's grid (:meth:`~TokenLoopViT._pos_embed_for`),
  what each block call receives besides the tokens
  (:meth:`~TokenLoopViT.layer_args`: nothing, the patch grid for GAug, the
  RoPE table for EVA) and how kept tokens become outputs
  (``_format_output``: the host's dense formats, and the global token of
  :class:`~mmlocat.models.layers.GlobalPool` for ``out_type='cls_token'``);
* one global token and one patch-score interface for every backbone:
  ``pooling`` (``'cls'`` / ``'gap'`` / ``'lazy_strike'`` and LazyStrike's
  options), ``score_query``, ``prr``, and :meth:`TokenLoopViT.
  forward_with_scores` (``docs/method.md#patch-score``);
* activation checkpointing per block (``with_cp``, as mmpretrain's and
  mmseg's ViTs): the loop runs each block under
  :func:`torch.utils.checkpoint.checkpoint` (non-reentrant), so training
  keeps only the blocks' inputs and recomputes the rest in the backward;
* strict ``Pretrained`` loading (:class:`~.vit_checks.StrictPretrainedMixin`,
  :mod:`mmlocat.utils.pretrained`) and the input checks of
  :mod:`.vit_checks`;
* the lifecycle, once: the ``arch`` / ``out_indices`` / ``frozen_stages``
  checks and mmseg's ``pretrained=`` in :meth:`TokenLoopViT.__init__`;
  one freezing mechanism (``frozen_stages``: the stem, prefix tokens and
  that many blocks; ``frozen=True``: everything), applied by
  :meth:`TokenLoopViT.apply_freezing` once the leaf class has built every
  part (blocks replaced, heads added) and kept by :meth:`TokenLoopViT.train`;
  ``init_weights`` with the whole-model schemes of :mod:`.vit_init`;
  a checkpoint's position embedding of another grid resampled on loading by
  the ``pos_embed_cfg`` rule (:meth:`TokenLoopViT._prepare_pos_embed`).
"""
import contextlib
import copy
import math
from abc import ABCMeta
from typing import Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from mmengine.logging import MMLogger
from mmengine.model import ModuleList
from mmpretrain.models.backbones import VisionTransformer
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from mmlocat.utils.init_info import SummarisedInitInfo
from mmlocat.utils.pretrained import pretrained_init_cfg
from ..layers.finite import finite_checks_on
from ..layers.global_pool import GlobalPool
from .pos_embed import build_pos_embed_cfg, resample_pos_embed
from .vit_archs import refuse_archs
from .vit_checks import (StrictPretrainedMixin, check_arch_args,
                         check_input_batch)
from .vit_init import init_weights_with_scheme

__all__ = ['TokenLoopViT']


class _FreezeWhenBuilt(ABCMeta):
    """Calls :meth:`TokenLoopViT.apply_freezing` after the outermost
    ``__init__``: the leaf classes build parts after the host's constructor
    (blocks replaced, projections added), so freezing must come last, and
    it is written once here instead of at the end of every constructor."""

    def __call__(cls, *args, **kwargs):
        model = super().__call__(*args, **kwargs)
        model.apply_freezing()
        return model


class TokenLoopViT(
        SummarisedInitInfo,
        StrictPretrainedMixin,
        VisionTransformer,
        metaclass=_FreezeWhenBuilt):
    """mmpretrain's ViT with one overridable token loop and one lifecycle
    (see the module).

    Args:
        arch: An alias of the class's ``arch_zoo`` or an arch dict.
        out_indices: As the host; checked (increasing, unique, in range).
        frozen_stages: Freeze the stem (patch embedding, position
            embedding, prefix tokens, pre-norm) and this many blocks
            (``-1``: none; the number of blocks also freezes the final
            norm); they stay in eval mode.
        frozen: Freeze every parameter and stay in eval mode (a frozen
            tower: F-ViT, zero-shot segmentation).
        pooling: The global token of ``out_type='cls_token'`` and of
            :meth:`forward_with_scores`: ``'cls'`` (the CLS output),
            ``'gap'`` (the patch-token mean) or ``'lazy_strike'``
            (LaSt-ViT's LazyStrike); ``None``: the class's
            ``DEFAULT_POOLING`` (``'cls'`` here). See
            :class:`~mmlocat.models.layers.GlobalPool`.
        topk: LazyStrike's patches per channel (released weights: 1).
        topk_ratio: LazyStrike's fraction of the patches instead of
            ``topk``.
        lazy_strike_score: ``'code'`` (released weights) or ``'paper'``.
        lazy_strike_window: ``'code'`` (released weights) or
            ``'centered'``.
        score_query: The token the patch scores are the cosine with:
            ``'global'`` (the global token) or ``'cls'`` (the CLS output).
        prr: LocAtViT's PRR before pooling (the pooled outputs only).
        pos_embed_cfg: The position-embedding resampling at other grids
            and of a checkpoint of another grid on loading
            (:mod:`.pos_embed`); ``None``: the class's
            ``DEFAULT_POS_EMBED_CFG`` (the host's resize here).
        with_cp: Activation checkpointing of every block in training
            (:meth:`run_block`).
        pretrained: mmseg's injected checkpoint path; becomes
            ``init_cfg=dict(type='Pretrained', checkpoint=...)``.
        init_cfg: Initialisation config (see :meth:`init_weights`).
        **kwargs: The host ``VisionTransformer``'s other arguments.
    """
    #: ``arch`` aliases this class refuses (see :func:`.vit_archs.
    #: refuse_archs`).
    REFUSED_ARCHS: Sequence[str] = ()
    #: Resampled position embeddings by grid, inside
    #: :meth:`constant_pos_embed` only.
    _pos_embed_cache: Optional[Dict[Tuple[int, int], Tensor]] = None
    DEFAULT_POS_EMBED_CFG = dict(resample='host')
    DEFAULT_POOLING = 'cls'

    def __init__(self,
                 arch: Union[str, dict] = 'base',
                 out_indices: Union[int, Sequence[int]] = -1,
                 frozen_stages: int = -1,
                 frozen: bool = False,
                 pooling: Optional[str] = None,
                 topk: Optional[int] = 1,
                 topk_ratio: Optional[float] = None,
                 lazy_strike_score: str = 'code',
                 lazy_strike_window: str = 'code',
                 score_query: str = 'global',
                 prr: bool = False,
                 pos_embed_cfg: Optional[dict] = None,
                 with_cp: bool = False,
                 pretrained: Optional[str] = None,
                 init_cfg: Optional[Union[dict, list]] = None,
                 **kwargs) -> None:
        refuse_archs(arch, self.REFUSED_ARCHS, type(self).__name__)
        pos_embed_cfg = build_pos_embed_cfg(pos_embed_cfg,
                                            self.DEFAULT_POS_EMBED_CFG)
        out_indices = check_arch_args(self.arch_zoo, arch, out_indices,
                                      frozen_stages)
        # The host would freeze before the leaf builds its own parts.
        super().__init__(
            arch=arch,
            out_indices=out_indices,
            frozen_stages=-1,
            init_cfg=pretrained_init_cfg(pretrained, init_cfg),
            **kwargs)
        self.frozen_stages = frozen_stages
        self.frozen = frozen
        self.with_cp = with_cp
        self.pos_embed_cfg = pos_embed_cfg
        self.pool = GlobalPool(
            self.DEFAULT_POOLING if pooling is None else pooling, topk,
            topk_ratio, lazy_strike_score, lazy_strike_window, score_query,
            self.arch_settings['num_heads'] if prr else None)

    @property
    def pooling(self) -> str:
        """The global-token choice (``self.pool.pooling``)."""
        return self.pool.pooling

    def apply_freezing(self) -> None:
        """Freeze what ``frozen_stages`` / ``frozen`` say (called once the
        model is built; see :class:`_FreezeWhenBuilt`)."""
        if self.frozen_stages > 0:
            self._freeze_stages()
        if self.frozen:
            self.requires_grad_(False)
            self.eval()

    def _freeze_stages(self) -> None:
        """The host's stages, plus every prefix token (registers)."""
        super()._freeze_stages()
        for token in self.prefix_tokens():
            token.requires_grad = False

    def train(self, mode: bool = True) -> 'TokenLoopViT':
        """Set the train mode; a ``frozen`` backbone always stays in eval,
        and so do the ``frozen_stages`` (as in mmpretrain's CNN backbones;
        its ViT would put them back in train mode)."""
        super().train(mode and not self.frozen)
        if mode and not self.frozen and self.frozen_stages > 0:
            self._freeze_stages()
        return self

    def init_weights(self) -> None:
        """The host's initialisation, a strict ``Pretrained`` load
        (:class:`~.vit_checks.StrictPretrainedMixin`), or a whole-model
        scheme of :mod:`.vit_init` named by ``init_cfg`` (e.g.
        ``dict(type='mmlocat.TimmViTInit')``), applied last."""
        if not init_weights_with_scheme(self, super().init_weights):
            super().init_weights()

    def replace_layers(self, layer_type: type,
                       layer_cfgs: Union[dict, Sequence[dict], None],
                       drop_path_rate: float, **common) -> None:
        """Replace the host's blocks by ``layer_type`` blocks.

        Every block gets the arch's ``embed_dims``, ``num_heads`` and
        ``feedforward_channels``, its linear stochastic-depth rate (as the
        host), ``common`` and then its entry of ``layer_cfgs`` (one dict
        for all blocks or one per block).

        Raises:
            ValueError: If a ``layer_cfgs`` list has another length.
        """
        if layer_cfgs is None:
            layer_cfgs = dict()
        if isinstance(layer_cfgs, dict):
            layer_cfgs = [layer_cfgs] * self.num_layers
        if len(layer_cfgs) != self.num_layers:
            raise ValueError(f'layer_cfgs has {len(layer_cfgs)} entries for '
                             f'{self.num_layers} layers')
        dpr = np.linspace(0, drop_path_rate, self.num_layers)
        self.layers = ModuleList()
        for i in range(self.num_layers):
            cfg = dict(
                embed_dims=self.embed_dims,
                num_heads=self.arch_settings['num_heads'],
                feedforward_channels=self.
                arch_settings['feedforward_channels'],
                drop_path_rate=float(dpr[i]),
                **copy.deepcopy(common))
            cfg.update(layer_cfgs[i])
            self.layers.append(layer_type(**cfg))

    def prefix_tokens(self) -> Sequence[Tensor]:
        """The ``(1, n, C)`` tokens put before the patches (CLS, ...)."""
        return [] if self.cls_token is None else [self.cls_token]

    def _pos_embed_for(self, hw: Tuple[int, int]) -> Tensor:
        """The position embedding at the patch grid ``hw``
        (``pos_embed_cfg``'s rule; a constant inside
        :meth:`constant_pos_embed`)."""
        if self._pos_embed_cache is None:
            return resample_pos_embed(self.pos_embed, self.patch_resolution,
                                      hw, self.num_extra_tokens,
                                      self.pos_embed_cfg,
                                      self.interpolate_mode)
        key = tuple(int(s) for s in hw)
        if key not in self._pos_embed_cache:
            self._pos_embed_cache[key] = resample_pos_embed(
                self.pos_embed, self.patch_resolution, key,
                self.num_extra_tokens, self.pos_embed_cfg,
                self.interpolate_mode).detach()
        return self._pos_embed_cache[key]

    @contextlib.contextmanager
    def constant_pos_embed(self) -> Iterator[None]:
        """Within: each grid's resampled position embedding is computed
        once and then reused as a constant (detached), e.g. for an ONNX
        export, which has no antialiased resampling op: run the model once
        at the export size, then trace."""
        self._pos_embed_cache = {}
        try:
            yield
        finally:
            self._pos_embed_cache = None

    def layer_args(self, hw: Tuple[int, int], tokens: Tensor) -> tuple:
        """Arguments of every block call after the tokens (none here)."""
        return ()

    def run_block(self, layer: nn.Module, tokens: Tensor,
                  args: tuple) -> Tensor:
        """One block call; checkpointed with ``with_cp`` when gradients are
        recorded (non-reentrant, RNG state preserved: dropout and stochastic
        depth draw the same masks in the recomputation)."""
        if self.with_cp and torch.is_grad_enabled():
            return checkpoint(layer, tokens, *args, use_reentrant=False)
        return layer(tokens, *args)

    def embed_tokens(
            self,
            x: Tensor,
            check_finite: bool = False) -> Tuple[Tensor, Tuple[int, int]]:
        """Images ``(B, C, H, W)`` -> the blocks' input tokens and grid.

        Checks the batch (its values only with ``check_finite``), embeds the
        patches, prepends the prefix tokens, adds the position embedding
        (if any) and applies the dropout and the pre-norm.
        """
        check_input_batch(x, check_finite, type(self).__name__)
        batch = x.shape[0]
        x, hw = self.patch_embed(x)
        hw = tuple(hw)
        prefix = [t.expand(batch, -1, -1) for t in self.prefix_tokens()]
        if prefix:
            x = torch.cat(prefix + [x], dim=1)
        if self.pos_embed is not None:
            x = x + self._pos_embed_for(hw)
        return self.pre_norm(self.drop_after_pos(x)), hw

    def checks_finite(self, check_finite: Optional[bool]) -> bool:
        """The caller's ``check_finite``, or this backbone's mode decides
        (:func:`~mmlocat.models.layers.finite.finite_checks_on`)."""
        return finite_checks_on(check_finite, self.training)

    def forward_intermediates(
        self,
        x: Tensor,
        indices: Sequence[int],
        check_finite: Optional[bool] = None
    ) -> Tuple[List[Tensor], Tuple[int, int]]:
        """Run the blocks and keep the tokens after those in ``indices``.

        Blocks after the last kept one are not run. The final norm (if
        ``final_norm``) follows the last block, as in the host.

        Args:
            x: Images ``(B, C, H, W)``.
            indices: Non-negative block indices, increasing.
            check_finite: Check the batch for NaN / inf; ``None`` decides by
                the mode (:meth:`checks_finite`).

        Returns:
            The kept ``(B, L, C)`` token sequences (in block order) and the
            patch grid ``(h, w)``.
        """
        tokens, hw = self.embed_tokens(x, self.checks_finite(check_finite))
        args = self.layer_args(hw, tokens)
        wanted = set(indices)
        stop = max(wanted, default=-1)
        last = len(self.layers) - 1
        kept = []
        for i, layer in enumerate(self.layers[:stop + 1]):
            tokens = self.run_block(layer, tokens, args)
            if i == last and self.final_norm:
                tokens = self.ln1(tokens)
            if i in wanted:
                kept.append(tokens)
        return kept, hw

    def embed_global(self, token: Tensor) -> Tensor:
        """Map ``(..., C)`` tokens to the output space (identity here; a
        CLIP tower projects them to the joint space)."""
        return token

    def _format_output(self,
                       x: Tensor,
                       hw: tuple,
                       check_finite: bool = False) -> Tensor:
        """One output of :meth:`forward`.

        ``'cls_token'``: the global token (:attr:`pool`), then
        :meth:`embed_global`; ``'avg_featmap'``: the host's norm after the
        patch-token mean (after PRR when on); ``'raw'`` / ``'featmap'``: the
        host's, a ``featmap`` made contiguous: mmpretrain's is a permuted
        view of the tokens (NHWC memory), and convolutions keep that layout,
        so an FPN's outputs are NHWC too; mmcv's ``RoIAlign`` reads its
        input as contiguous NCHW memory whatever the strides
        (open-mmlab/mmcv#2203): every mmdet RoI head would pool from the
        wrong positions. One copy per output.
        """
        if self.out_type == 'cls_token':
            return self.embed_global(
                self.pool(x, self.num_extra_tokens, check_finite,
                          self.cls_token is not None))
        if self.out_type == 'avg_featmap':
            patches = self.pool.refine(x)[:, self.num_extra_tokens:]
            return self.ln2(patches.mean(dim=1))
        out = super()._format_output(x, hw)
        return out.contiguous() if out.dim() == 4 else out

    def forward_with_scores(
            self,
            x: Tensor,
            check_finite: Optional[bool] = None) -> Dict[str, Tensor]:
        """Global token, patch scores and LazyStrike votes, for analysis
        (``docs/method.md#patch-score``).

        Args:
            x: ``(B, 3, H, W)`` images.
            check_finite: As in :meth:`forward`.

        Returns:
            A dict with :meth:`GlobalPool.scores
            <mmlocat.models.layers.GlobalPool.scores>`' ``global_token``
            ``(B, C)`` (before any output projection), ``patch_score``
            ``(B, 1, h, w)`` and ``vote_map`` ``(B, 1, h, w)`` (LazyStrike's
            votes whatever the pooling, to compare), ``embedding`` (the
            global token through :meth:`embed_global`) and ``featmap``
            ``(B, C, h, w)`` (the scored final-norm patch tokens).
        """
        check = self.checks_finite(check_finite)
        (tokens, ), hw = self.forward_intermediates(x, [len(self.layers) - 1],
                                                    check)
        out = self.pool.scores(
            tokens,
            hw,
            self.num_extra_tokens,
            check,
            votes=True,
            has_cls=self.cls_token is not None)
        out['embedding'] = self.embed_global(out['global_token'])
        patches = tokens[:, self.num_extra_tokens:]
        out['featmap'] = patches.reshape(patches.shape[0], *hw,
                                         -1).permute(0, 3, 1, 2)
        return out

    def _prepare_pos_embed(self, state_dict: dict, prefix: str, *args,
                           **kwargs) -> None:
        """Resample a checkpoint's ``pos_embed`` of another grid to this
        model on loading, by the ``pos_embed_cfg`` rule (the host's
        ``_prepare_pos_embed`` for the default ``resample='host'``; a
        non-square source grid is refused with a message)."""
        name = prefix + 'pos_embed'
        if name not in state_dict or self.pos_embed is None:
            return
        ckpt = state_dict[name]
        if ckpt.dim() != 3:
            return  # let load_state_dict report the mismatch
        num_prefix = self.num_extra_tokens
        length = ckpt.shape[1]
        if self.cls_token is None and (length == self.pos_embed.shape[1] + 1 or
                                       (not _is_square(length - num_prefix) and
                                        _is_square(length - num_prefix - 1))):
            # The checkpoint has a CLS embedding this model does not use.
            ckpt = state_dict[name] = ckpt[:, 1:]
            length -= 1
        if ckpt.shape == self.pos_embed.shape:
            return
        if not _is_square(length - num_prefix):
            raise ValueError(
                f'cannot resize pos_embed of shape {tuple(ckpt.shape)} '
                f'from the checkpoint: with {num_prefix} prefix tokens its '
                f'{length - num_prefix} patch positions are not a square '
                'grid (different number of CLS/register tokens?)')
        side = math.isqrt(length - num_prefix)
        MMLogger.get_current_instance().info(
            f'Resize the pos_embed shape from {tuple(ckpt.shape)}'
            f' to {tuple(self.pos_embed.shape)}.')
        state_dict[name] = resample_pos_embed(ckpt, (side, side),
                                              self.patch_resolution,
                                              num_prefix, self.pos_embed_cfg,
                                              self.interpolate_mode)

    def get_layer_depth(self,
                        param_name: str,
                        prefix: str = '') -> Tuple[int, int]:
        """Layer depth for layer-wise lr decay, as the host; ``pre_norm``
        is the stem (the host puts it with the head)."""
        if param_name.startswith(prefix + 'pre_norm'):
            return 0, self.num_layers + 2
        return super().get_layer_depth(param_name, prefix)

    def forward(self,
                x: Tensor,
                check_finite: Optional[bool] = None) -> Tuple[Tensor, ...]:
        """One output per ``out_indices`` entry, as the host.

        Args:
            x: Images ``(B, C, H, W)``.
            check_finite: Check the batch (and the pooling) for NaN / inf;
                ``None`` decides by the mode (:meth:`checks_finite`).
        """
        check = self.checks_finite(check_finite)
        tokens, hw = self.forward_intermediates(x, self.out_indices, check)
        return tuple(self._format_output(t, hw, check) for t in tokens)


def _is_square(n: int) -> bool:
    return n > 0 and math.isqrt(n)**2 == n
