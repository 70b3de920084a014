"""CLIP image tower (OpenAI layout) with optional LazyStrike pooling.

OpenAI CLIP, "Learning Transferable Visual Models From Natural Language
Supervision", https://arxiv.org/abs/2103.00020, with the LaSt-ViT global
token of "Vision Transformers Need More Than Registers",
https://arxiv.org/abs/2602.22394. Layout: bias-free patch convolution,
class embedding, position embedding, ``ln_pre``, residual blocks with
QuickGELU MLPs, ``ln_post`` and an output projection. The global token is
pooled after ``ln_post`` and then projected.
"""
import copy
from typing import Dict, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mmlocat.registry import MODELS
from .last_vit import LaStViT

__all__ = ['CLIPViT']

_QUICK_GELU = dict(type='mmpretrain.QuickGELU')


@MODELS.register_module()
class CLIPViT(LaStViT):
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
        norm_cfg: Norm config; CLIP uses ``LayerNorm(eps=1e-5)``.
        layer_cfgs: Extra encoder-layer arguments; the activation defaults
            to ``mmpretrain.QuickGELU``.
        **kwargs: Arguments of :class:`LaStViT` (``pooling``, ``topk``,
            ``topk_ratio``, ``frozen``, ``out_type``, ``out_indices``, ...).
    """
    arch_zoo = {
        **dict.fromkeys(['b', 'base'],
                        dict(
                            embed_dims=768,
                            num_layers=12,
                            num_heads=12,
                            feedforward_channels=3072,
                            output_dims=512)),
        **dict.fromkeys(['l', 'large'],
                        dict(
                            embed_dims=1024,
                            num_layers=24,
                            num_heads=16,
                            feedforward_channels=4096,
                            output_dims=768)),
    }

    def __init__(self,
                 arch: Union[str, dict] = 'base',
                 output_dims: Optional[int] = None,
                 norm_cfg: dict = dict(type='LN', eps=1e-5),
                 layer_cfgs: Optional[dict] = None,
                 **kwargs) -> None:
        for key in ('pre_norm', 'final_norm', 'qkv_bias'):
            if key in kwargs and not kwargs[key]:
                raise ValueError(f'CLIPViT needs {key}=True')
        if layer_cfgs is None:
            layer_cfgs = dict()
        if isinstance(layer_cfgs, dict):
            layer_cfgs = dict(layer_cfgs)
            layer_cfgs.setdefault('act_cfg', copy.deepcopy(_QUICK_GELU))
        kwargs.update(pre_norm=True, final_norm=True, qkv_bias=True)
        super().__init__(
            arch=arch, norm_cfg=norm_cfg, layer_cfgs=layer_cfgs, **kwargs)
        if output_dims is None:
            output_dims = self.arch_settings.get('output_dims')
        if output_dims is not None:
            self.proj = nn.Parameter(
                torch.randn(self.embed_dims, output_dims) *
                self.embed_dims**-0.5)
        else:
            self.proj = None
        self.output_dims = output_dims
        self._apply_frozen()

    def embed_global(self, token: Tensor) -> Tensor:
        """Project ``(..., C)`` tokens to the joint embedding space."""
        if self.proj is None:
            return token
        return token @ self.proj

    def forward_with_scores(self, x: Tensor) -> Dict[str, Tensor]:
        """As :meth:`LaStViT.forward_with_scores`, plus ``embedding``: the
        projected global token."""
        out = super().forward_with_scores(x)
        out['embedding'] = self.embed_global(out['global_token'])
        return out

    def value_path_dense(self, tokens: Tensor, hw: Tuple[int, int]) -> Tensor:
        """F-ViT's dense CLIP map from the tokens entering the last block.

        The last block runs with its attention replaced by the value path
        (``proj(v)``, no query-key mixing), residuals and MLP kept; then
        ``ln_post``, the output projection and an L2 norm per patch
        (CLIPSelf, https://arxiv.org/abs/2310.01403).

        Args:
            tokens: ``(B, L, C)`` input of the last block (prefix tokens
                first).
            hw: Patch grid ``(h, w)``.

        Returns:
            ``(B, D, h, w)`` unit-norm patch embeddings.
        """
        layer = self.layers[-1]
        qkv = layer.attn.qkv
        channels = self.embed_dims
        value = F.linear(
            layer.ln1(tokens), qkv.weight[2 * channels:],
            None if qkv.bias is None else qkv.bias[2 * channels:])
        attn_out = layer.attn.proj(value)
        if hasattr(layer.attn, 'gamma1'):  # layer scale (identity in CLIP)
            attn_out = layer.attn.gamma1(attn_out)
        x = tokens + attn_out
        x = layer.ffn(layer.ln2(x), identity=x)
        if self.final_norm:
            x = self.ln1(x)
        patches = F.normalize(
            self.embed_global(x[:, self.num_extra_tokens:]), dim=-1)
        return patches.transpose(1, 2).reshape(patches.shape[0], -1, *hw)

    def forward_dense(self, x: Tensor) -> Tuple[Tuple[Tensor, ...], Tensor]:
        """:meth:`forward`'s outputs plus :meth:`value_path_dense`'s map,
        from one pass through the network."""
        before_last = len(self.layers) - 2
        if before_last < 0:
            raise ValueError('the dense CLIP map needs at least 2 layers')
        indices = sorted(set(self.out_indices) | {before_last})
        kept, hw = self._encode(x, indices)
        by_index = dict(zip(indices, kept))
        outs = tuple(
            self._format_output(by_index[i], hw) for i in self.out_indices)
        return outs, self.value_path_dense(by_index[before_last], hw)

    def get_layer_depth(self, param_name: str, prefix: str = ''):
        """Layer depth for layer-wise lr decay; ``proj`` is the last."""
        if param_name == prefix + 'proj':
            return self.num_layers + 1, self.num_layers + 2
        return super().get_layer_depth(param_name, prefix)
