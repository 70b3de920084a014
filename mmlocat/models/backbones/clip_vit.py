"""CLIP image tower (OpenAI layout) with optional LazyStrike pooling.

OpenAI CLIP, "Learning Transferable Visual Models From Natural Language
Supervision", https://arxiv.org/abs/2103.00020, with the LaSt-ViT global
token of "Vision Transformers Need More Than Registers",
https://arxiv.org/abs/2602.22394. Layout: bias-free patch convolution,
class embedding, position embedding, ``ln_pre``, residual blocks with
QuickGELU (OpenAI, ``*-quickgelu`` open_clip models) or exact-GELU (most
open_clip models) MLPs, ``ln_post`` and an output projection. The global
token is pooled after ``ln_post`` and then projected.
"""
import copy
import logging
import os.path as osp
from typing import Dict, Optional, Union

import torch
import torch.nn.functional as F
from mmengine.logging import print_log
from torch import Tensor, nn

from mmlocat.registry import MODELS
from mmlocat.utils.pretrained import is_pretrained_cfg, pretrained_init_cfg
from mmlocat.utils.records import CLIP_KEY, read_checkpoint_meta
from .clip_tower import CLIPTower, clip_archs

__all__ = ['CLIPViT']

# MLP activations by the names the converters record in a checkpoint's
# ``meta['clip']['act']``.
ACTIVATIONS = dict(
    quick_gelu=dict(type='mmpretrain.QuickGELU'), gelu=dict(type='GELU'))


def _checkpoint_of(init_cfg) -> Optional[str]:
    if is_pretrained_cfg(init_cfg):
        return init_cfg.get('checkpoint')
    return None


def recorded_act(init_cfg) -> Optional[str]:
    """The MLP activation a converted checkpoint records, if any."""
    checkpoint = _checkpoint_of(init_cfg)
    if checkpoint is None or ('://' not in checkpoint
                              and not osp.isfile(checkpoint)):
        return None  # loading the weights names the missing file
    return (read_checkpoint_meta(checkpoint).get(CLIP_KEY) or {}).get('act')


@MODELS.register_module()
class CLIPViT(CLIPTower):
    """OpenAI-CLIP vision transformer on mmpretrain's ViT, LaSt-ready.

    Parameter names are the mmpretrain ones (``pre_norm`` = ``ln_pre``,
    ``ln1`` = ``ln_post``) plus ``proj`` (``(C, output_dims)``, applied as
    ``x @ proj``); :func:`mmlocat.utils.converters.convert_clip` maps OpenAI
    CLIP and open_clip weights to them.

    ``out_type='cls_token'`` returns the projected global token (LazyStrike
    or CLS); ``out_type='featmap'`` with ``out_indices`` (e.g.
    ``(3, 5, 7, 11)``) returns stride-``patch_size`` maps at any input size
    for dense heads (F-ViT); ``frozen=True`` freezes all weights and keeps
    the module in eval mode.

    Args:
        arch: ``'b'``/``'base'`` (768-d, 12 layers, 512-d output),
            ``'l'``/``'large'`` (1024-d, 24 layers, 768-d output) or a dict
            with ``embed_dims``, ``num_layers``, ``num_heads``,
            ``feedforward_channels`` and optionally ``output_dims``.
        output_dims: Projection size; ``None`` takes it from ``arch`` (an
            arch without ``output_dims`` gets no projection).
        act: MLP activation, ``'quick_gelu'`` (OpenAI CLIP, open_clip
            ``*-quickgelu``) or ``'gelu'`` (exact; ``ViT-B-16``,
            ``ViT-L-14`` and most open_clip models). ``None`` follows the
            ``Pretrained`` checkpoint (its converter records the source
            model's activation in ``meta['clip']['act']``) and is
            ``'quick_gelu'`` when nothing is recorded. A checkpoint that
            records another activation than the model's is refused.
        norm_cfg: Norm config; CLIP uses ``LayerNorm(eps=1e-5)``.
        layer_cfgs: Extra encoder-layer arguments; ``act_cfg`` there
            overrides ``act``.
        **kwargs: Arguments of :class:`~.vit_base.TokenLoopViT`
            (``pooling``, ``topk``, ``topk_ratio``, ``frozen``,
            ``with_cp``, ``out_type``, ``out_indices``, ...).
    """
    # The shared ViT-B / ViT-L sizes with CLIP's joint-space widths.
    arch_zoo = clip_archs(b=dict(output_dims=512), l=dict(output_dims=768))

    def __init__(self,
                 arch: Union[str, dict] = 'base',
                 output_dims: Optional[int] = None,
                 act: Optional[str] = None,
                 norm_cfg: dict = dict(type='LN', eps=1e-5),
                 layer_cfgs: Optional[dict] = None,
                 **kwargs) -> None:
        for key in ('pre_norm', 'final_norm', 'qkv_bias'):
            if key in kwargs and not kwargs[key]:
                raise ValueError(f'CLIPViT needs {key}=True')
        if act is None:
            # mmseg injects ``pretrained=``, turned into init_cfg by the base
            act = recorded_act(
                pretrained_init_cfg(
                    kwargs.get('pretrained'), kwargs.get('init_cfg')))
            if act is None:
                act = 'quick_gelu'
                print_log(
                    "CLIPViT: no converted checkpoint records the MLP "
                    "activation; using act='quick_gelu' (OpenAI CLIP). "
                    "open_clip's LAION-trained models need act='gelu'.",
                    logger='current',
                    level=logging.INFO)
        if act not in ACTIVATIONS:
            raise ValueError(f'act must be one of {sorted(ACTIVATIONS)}, got '
                             f'{act!r}')
        if layer_cfgs is None:
            layer_cfgs = dict()
        if isinstance(layer_cfgs, dict):
            layer_cfgs = dict(layer_cfgs)
            layer_cfgs.setdefault('act_cfg', copy.deepcopy(ACTIVATIONS[act]))
        kwargs.update(pre_norm=True, final_norm=True, qkv_bias=True)
        super().__init__(
            arch=arch, norm_cfg=norm_cfg, layer_cfgs=layer_cfgs, **kwargs)
        output_dims = self.output_dims_of(output_dims)
        if output_dims is not None:
            self.proj = nn.Parameter(
                torch.randn(self.embed_dims, output_dims) *
                self.embed_dims**-0.5)
        else:
            self.proj = None
        self.output_dims = output_dims
        self.act = act

    OUTPUT_HEAD = 'proj'

    def embed_global(self, token: Tensor) -> Tensor:
        """Project ``(..., C)`` tokens to the joint embedding space."""
        if self.proj is None:
            return token
        return token @ self.proj

    def expected_unused_keys(self) -> Dict[str, str]:
        """As the parent, plus ``proj`` when ``output_dims`` is None."""
        unused = super().expected_unused_keys()
        if self.proj is None:
            unused['proj'] = 'output_dims=None builds no projection'
        return unused

    def init_weights(self) -> None:
        """As the parent, after checking the checkpoint's activation."""
        checkpoint = _checkpoint_of(self.init_cfg)
        found = recorded_act(self.init_cfg)
        if found is not None and found != self.act:
            raise ValueError(
                f'{checkpoint} was converted from a CLIP with act={found!r} '
                f'but this CLIPViT has act={self.act!r}; set act={found!r} '
                '(or leave act=None to follow the checkpoint)')
        super().init_weights()

    def value_path_block(self, tokens: Tensor) -> Tensor:
        """The last block with its attention replaced by the value path.

        ``x + proj(v(ln1(x)))`` (no query-key mixing), then the MLP with
        its residual, as CLIPSelf's F-ViT
        (https://arxiv.org/abs/2310.01403); no final norm.

        Args:
            tokens: ``(B, L, C)`` input of the last block.

        Returns:
            ``(B, L, C)`` tokens.
        """
        layer = self.layers[-1]
        qkv = layer.attn.qkv
        channels = self.embed_dims
        value = F.linear(
            layer.ln1(tokens), qkv.weight[2 * channels:],
            None if qkv.bias is None else qkv.bias[2 * channels:])
        # gamma1: the host attention's layer scale (identity in CLIP)
        x = tokens + layer.attn.gamma1(layer.attn.proj(value))
        return layer.ffn(layer.ln2(x), identity=x)
