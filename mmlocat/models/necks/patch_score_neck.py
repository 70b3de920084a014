"""Patch-score neck: global token, patch-score map and a modulated pyramid.

mmlocat's own design on top of "Vision Transformers Need More Than
Registers" (Shi et al., CVPR 2026, https://arxiv.org/abs/2602.22394); the
paper has no neck. The simple feature pyramid follows ViTDet ("Exploring
Plain Vision Transformer Backbones for Object Detection",
https://arxiv.org/abs/2203.16527) and mmseg's ``MultiLevelNeck``.

The neck scores every patch of the last backbone map by its cosine with a
global token (:class:`~mmlocat.models.layers.GlobalPool`, the backbones'
component: LazyStrike, the backbone's CLS output, or GAP), builds strides
4/8/16/32 from a plain ViT's stride-16 map, and lets the score modulate each
level as ``F * (1 + gamma_l * resize(s))``. ``gamma_l`` starts at 0, so a
freshly built neck is exactly a plain pyramid.
"""
import math
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from mmcv.cnn import build_activation_layer, build_norm_layer
from mmengine.model import BaseModule
from torch import Tensor, nn

from mmlocat.registry import MODELS
from ..layers import GlobalPool
from ..layers.finite import finite_checks_on

__all__ = ['PatchScoreNeck']

NeckInput = Union[Tensor, Sequence[Tensor]]


def _rescale_block(channels: int, scale: float, norm_cfg: Optional[dict],
                   act_cfg: dict) -> nn.Module:
    """Deconvs for scales > 1, identity for 1, max-pool for scales < 1."""
    steps = int(round(math.log2(scale)))
    if steps == 0:
        return nn.Identity()
    if steps < 0:
        return nn.MaxPool2d(kernel_size=2**-steps, stride=2**-steps)
    layers: List[nn.Module] = []
    for i in range(steps):
        if i > 0:  # ViTDet: norm + activation between the deconvs
            if norm_cfg is not None:
                layers.append(build_norm_layer(norm_cfg, channels)[1])
            layers.append(build_activation_layer(act_cfg))
        layers.append(
            nn.ConvTranspose2d(channels, channels, kernel_size=2, stride=2))
    return nn.Sequential(*layers)


def _conv(in_ch: int, out_ch: int, kernel: int,
          norm_cfg: Optional[dict]) -> nn.Module:
    """Conv (bias only without norm) followed by the optional norm."""
    conv = nn.Conv2d(
        in_ch, out_ch, kernel, padding=kernel // 2, bias=norm_cfg is None)
    if norm_cfg is None:
        return conv
    return nn.Sequential(conv, build_norm_layer(norm_cfg, out_ch)[1])


@MODELS.register_module()
class PatchScoreNeck(BaseModule):
    """Patch-score map, global token and score-modulated feature pyramid.

    Works as a neck of mmpretrain classifiers, mmseg segmentors and mmdet
    detectors: a tuple in, a tuple out. Each element of the input tuple is
    one of

    * a ``(B, C, h, w)`` feature map (e.g. ``out_type='featmap'``);
    * a ``(featmap, token)`` pair with the backbone's ``(B, C)`` global token
      (needed by ``pooling='cls'`` and ``score_query='cls'``);
    * ``(B, P + h*w, C)`` raw tokens (mmpretrain ``out_type='raw'``) with
      ``P = num_prefix_tokens`` prefix tokens; the first one is the CLS
      output, the grid must be square (pass a pair for non-square inputs).

    The last element is scored. ``mode='pyramid'`` returns one map per
    entry of ``scales``, built from the single input (a plain ViT) or from
    input ``i`` for level ``i`` when there are as many inputs as scales.
    ``mode='classification'`` returns ``(global_token,)`` for a cls head and
    builds no pyramid layers. :meth:`forward_with_scores` also returns the
    score and vote maps (no state is kept on the module).

    Args:
        in_channels: Channels of the inputs (one int for all or a list).
        out_channels: If given, every level gets ViTDet's 1x1 + 3x3 output
            convs to this width; if None the levels keep ``in_channels``.
        scales: Resize factor of each level w.r.t. the input; powers of two:
            ``2**k`` uses ``k`` stride-2 deconvs, ``1`` identity, ``2**-k``
            a ``2**k`` max-pool. ``(4, 2, 1, 0.5)`` turns a stride-16 map
            into strides 4/8/16/32.
        mode: ``'pyramid'`` or ``'classification'``.
        pooling: The global token, as the backbones' ``pooling``
            (:class:`~mmlocat.models.layers.GlobalPool`): ``'lazy_strike'``
            (LazyStrike of the scored map's tokens), ``'cls'`` (the
            backbone's token: CLS output of a plain ViT, or LaSt-ViT's
            token) or ``'gap'`` (mean of the tokens; on a CNN map with
            ``mode='classification'`` it is mmpretrain's
            ``GlobalAveragePooling``).
        topk: LazyStrike patches per channel.
        topk_ratio: LazyStrike fraction of patches instead of ``topk``.
        lazy_strike_score: ``'code'`` or ``'paper'``.
        lazy_strike_window: ``'code'`` or ``'centered'``.
        score_query: ``'global'`` (the global token) or ``'cls'`` (the
            backbone's token), as the backbones'.
        modulate: Multiply level ``l`` by ``1 + gamma_l * resize(s)`` with a
            learnable ``gamma_l`` initialised to 0.
        num_prefix_tokens: Prefix (CLS, register) tokens of raw inputs.
        norm_cfg: Norm of the deconv stack and the output convs (e.g.
            ``dict(type='BN')``); None for none.
        act_cfg: Activation between stacked deconvs.
        init_cfg: Initialisation config of :class:`BaseModule`.
    """
    MODES = ('pyramid', 'classification')

    def __init__(self,
                 in_channels: Union[int, Sequence[int]],
                 out_channels: Optional[int] = None,
                 scales: Sequence[float] = (4, 2, 1, 0.5),
                 mode: str = 'pyramid',
                 pooling: str = 'lazy_strike',
                 topk: Optional[int] = 1,
                 topk_ratio: Optional[float] = None,
                 lazy_strike_score: str = 'code',
                 lazy_strike_window: str = 'code',
                 score_query: str = 'global',
                 modulate: bool = True,
                 num_prefix_tokens: int = 1,
                 norm_cfg: Optional[dict] = None,
                 act_cfg: dict = dict(type='GELU'),
                 init_cfg: Optional[Union[dict, List[dict]]] = None) -> None:
        super().__init__(init_cfg=init_cfg)
        if mode not in self.MODES:
            raise ValueError(f'mode must be one of {self.MODES}, got {mode!r}')
        self.pool = GlobalPool(pooling, topk, topk_ratio, lazy_strike_score,
                               lazy_strike_window, score_query)
        if num_prefix_tokens < 0:
            raise ValueError('num_prefix_tokens must be >= 0, got '
                             f'{num_prefix_tokens}')
        self.mode = mode
        self.num_prefix_tokens = num_prefix_tokens
        self.in_channels = ([in_channels] if isinstance(in_channels, int) else
                            list(in_channels))
        if not self.in_channels or min(self.in_channels) < 1:
            raise ValueError(f'invalid in_channels {in_channels}')
        self.scales = tuple(float(s) for s in scales)
        self.out_channels = out_channels
        self.modulate = modulate and mode == 'pyramid'
        if mode == 'pyramid':
            self._build_pyramid(norm_cfg, act_cfg)

    def _build_pyramid(self, norm_cfg: Optional[dict], act_cfg: dict) -> None:
        if not self.scales:
            raise ValueError('scales must not be empty')
        for s in self.scales:
            if s <= 0 or abs(math.log2(s) - round(math.log2(s))) > 1e-9:
                raise ValueError(f'scales must be powers of two, got {s}')
        num_levels = len(self.scales)
        if len(self.in_channels) not in (1, num_levels):
            raise ValueError(f'in_channels {self.in_channels} must have 1 or '
                             f'len(scales)={num_levels} entries')
        # one input feeds every level, else input i feeds level i
        level_in = self.in_channels * num_levels if len(
            self.in_channels) == 1 else self.in_channels
        self.rescales = nn.ModuleList(
            _rescale_block(c, s, norm_cfg, act_cfg)
            for c, s in zip(level_in, self.scales))
        if self.out_channels is None:
            self.out_convs = nn.ModuleList(nn.Identity() for _ in level_in)
        else:
            self.out_convs = nn.ModuleList(
                nn.Sequential(
                    _conv(c, self.out_channels, 1, norm_cfg),
                    _conv(self.out_channels, self.out_channels, 3, norm_cfg))
                for c in level_in)
        if self.modulate:
            self.gamma = nn.Parameter(torch.zeros(num_levels))

    def _split(self, item: NeckInput) -> Tuple[Tensor, Tensor, int]:
        """One input element -> ``(featmap (B, C, h, w), tokens (B, P + h*w,
        C), P)``: the map for the pyramid, the sequence to pool and score."""
        if isinstance(item, (tuple, list)):
            if len(item) != 2:
                raise ValueError('a pair input must be (featmap, token), got '
                                 f'{len(item)} elements')
            featmap, token = item
            if (not isinstance(featmap, Tensor) or featmap.dim() != 4
                    or not isinstance(token, Tensor) or token.dim() != 2
                    or token.shape != featmap.shape[:2]):
                raise ValueError('a pair input must be (featmap (B, C, h, w),'
                                 ' token (B, C)), got shapes '
                                 f'{[tuple(t.shape) for t in item]}')
            tokens = torch.cat(
                [token[:, None],
                 featmap.flatten(2).transpose(1, 2)], dim=1)
            return featmap, tokens, 1
        if not isinstance(item, Tensor):
            raise TypeError(f'neck inputs must be tensors, got {type(item)}')
        if item.dim() == 4:
            return item, item.flatten(2).transpose(1, 2), 0
        if item.dim() == 3:
            batch, length, channels = item.shape
            num = length - self.num_prefix_tokens
            side = math.isqrt(max(num, 0))
            if num < 1 or side * side != num:
                raise ValueError(
                    f'raw tokens {tuple(item.shape)} with '
                    f'{self.num_prefix_tokens} prefix tokens do not form a '
                    'square grid; pass a (featmap, token) pair instead')
            patches = item[:, self.num_prefix_tokens:]
            featmap = patches.transpose(1, 2).reshape(batch, channels, side,
                                                      side)
            return featmap, item, self.num_prefix_tokens
        raise ValueError('neck inputs must be (B, C, h, w) maps, (B, L, C) '
                         f'tokens or pairs, got shape {tuple(item.shape)}')

    def compute_scores(self, featmap: Tensor, tokens: Tensor,
                       num_prefix_tokens: int) -> Dict[str, Optional[Tensor]]:
        """Global token, ``(B, 1, h, w)`` patch scores and LazyStrike votes
        of one :meth:`_split` input (:meth:`GlobalPool.scores
        <mmlocat.models.layers.GlobalPool.scores>`).

        Raises:
            ValueError: If ``pooling='cls'`` or ``score_query='cls'`` and
                the input carries no backbone token.
        """
        if num_prefix_tokens == 0 and 'cls' in (self.pool.pooling,
                                                self.pool.score_query):
            raise ValueError(
                f'pooling={self.pool.pooling!r}, score_query='
                f"{self.pool.score_query!r} need the backbone's global "
                "token: use out_type='raw' tokens or (featmap, token) pairs")
        check = finite_checks_on(None, self.training)
        return self.pool.scores(tokens, featmap.shape[-2:], num_prefix_tokens,
                                check)

    def forward_with_scores(self,
                            inputs: Sequence[NeckInput]) -> Dict[str, object]:
        """Run the neck and also return the maps it scored with.

        Returns:
            A dict with ``outs`` (what :meth:`forward` returns) and the
            entries of :meth:`compute_scores`.
        """
        if not isinstance(inputs, (tuple, list)) or not inputs:
            raise TypeError('PatchScoreNeck expects a non-empty tuple of '
                            f'backbone outputs, got {type(inputs)}')
        parsed = [self._split(item) for item in inputs]
        featmaps = [p[0] for p in parsed]
        result = self.compute_scores(*parsed[-1])
        if self.mode == 'classification':
            result['outs'] = (result['global_token'], )
            return result
        if len(featmaps) not in (1, len(self.scales)):
            raise ValueError(f'got {len(featmaps)} inputs for '
                             f'{len(self.scales)} levels; give 1 or as many')
        if len(featmaps) == 1:
            featmaps = featmaps * len(self.scales)
        outs = []
        for i, featmap in enumerate(featmaps):
            x = self.out_convs[i](self.rescales[i](featmap))
            if self.modulate:
                # static ints: an ONNX trace keeps the sizes known
                s = F.interpolate(
                    result['patch_score'].to(x.dtype),
                    size=tuple(int(d) for d in x.shape[-2:]),
                    mode='bilinear',
                    align_corners=False)
                x = x * (1 + self.gamma[i] * s)
            outs.append(x)
        result['outs'] = tuple(outs)
        return result

    def forward(self, inputs: Sequence[NeckInput]) -> Tuple[Tensor, ...]:
        """Pyramid levels, or ``(global_token,)`` in classification mode."""
        return self.forward_with_scores(inputs)['outs']
