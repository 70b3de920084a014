"""EVA02-CLIP image tower with optional LazyStrike pooling.

EVA-CLIP (Sun et al., "EVA-CLIP: Improved Training Techniques for CLIP at
Scale", https://arxiv.org/abs/2303.15389) on the EVA-02 ViT
(https://arxiv.org/abs/2303.11331), the backbone of the LaSt-ViT paper's
F-ViT results ("Vision Transformers Need More Than Registers",
https://arxiv.org/abs/2602.22394). Layout after baaivision/EVA
(``EVA-CLIP``): biased patch convolution, class token, absolute position
embedding, no pre-norm, 2-D RoPE layers (:mod:`.eva02_clip_layers`), a final
``LayerNorm(eps=1e-6)`` and a linear ``head`` to the joint embedding space.
The global token is pooled after the final norm and then projected.
"""
from typing import Dict, Optional, Sequence, Tuple, Union

from torch import Tensor, nn

from mmlocat.registry import MODELS
from .clip_tower import CLIPTower, clip_archs
from .eva02_clip_layers import EVA02CLIPLayer, RopeTable, eva_rope_table

__all__ = ['EVA02CLIPViT']


@MODELS.register_module()
class EVA02CLIPViT(CLIPTower):
    """EVA02-CLIP vision transformer on mmpretrain's ViT, LaSt-ready.

    Same interface as :class:`mmlocat.CLIPViT`: ``out_type='cls_token'``
    returns the projected global token (LazyStrike or CLS, as
    ``pooling``), ``'featmap'`` with ``out_indices`` returns
    stride-``patch_size`` maps at any input size (the position embedding is
    resampled bicubically and RoPE is recomputed for the grid),
    :meth:`forward_dense` adds F-ViT's dense CLIP map and ``frozen=True``
    freezes everything and keeps eval mode. Parameter names:
    ``patch_embed.projection``, ``cls_token``, ``pos_embed``,
    ``layers.i.{ln1, attn.{q,k,v}_proj, attn.sub_norm, attn.proj, ln2,
    ffn.{w12, norm, w3}}``, ``ln1`` (EVA's final ``norm``) and ``head``;
    :func:`mmlocat.utils.converters.convert_eva02_clip` maps EVA-CLIP and
    open_clip/timm checkpoints to them.

    Args:
        arch: ``'b'``/``'base'`` (B/16: 768-d, 12 layers, 12 heads, 512-d
            output, 224 px), ``'l'``/``'large'`` (L/14-336: 1024-d, 24
            layers, 16 heads, 768-d output, 336 px) or a dict with
            ``embed_dims``, ``num_layers``, ``num_heads``,
            ``feedforward_channels`` and optionally ``output_dims``,
            ``patch_size`` and ``img_size``.
        img_size: Pre-training input size (grid of ``pos_embed``);
            ``None`` takes it from ``arch``.
        patch_size: ``None`` takes it from ``arch``.
        output_dims: ``head`` output size; ``None`` takes it from ``arch``
            (an arch without ``output_dims`` gets no head).
        rope_pt_seq_len: Grid side the RoPE was pre-trained with (16 for
            the released towers; positions are rescaled to it).
        rope_theta: RoPE frequency base.
        sub_ln: LayerNorms inside attention and MLP (EVA02-CLIP: True).
        qkv_bias: Learn q and v biases.
        norm_cfg: Norm config; EVA uses ``LayerNorm(eps=1e-6)``.
        drop_rate: Dropout after position embedding, attention and MLP.
        attn_drop_rate: Attention dropout.
        drop_path_rate: Maximum stochastic depth.
        layer_cfgs: Extra :class:`EVA02CLIPLayer` arguments, one dict for
            all layers or one per layer.
        **kwargs: Arguments of :class:`~.vit_base.TokenLoopViT`
            (``pooling``, ``topk``, ``topk_ratio``, ``frozen``,
            ``with_cp``, ``out_type``, ``out_indices``, ``init_cfg``, ...).
    """
    # The shared ViT-B / ViT-L sizes with EVA's SwiGLU widths (2/3 of 4x,
    # as released), joint-space widths and pre-training inputs.
    arch_zoo = clip_archs(
        b=dict(
            feedforward_channels=2048,
            output_dims=512,
            patch_size=16,
            img_size=224),
        l=dict(
            feedforward_channels=2730,
            output_dims=768,
            patch_size=14,
            img_size=336))

    def __init__(self,
                 arch: Union[str, dict] = 'base',
                 img_size: Optional[int] = None,
                 patch_size: Optional[int] = None,
                 output_dims: Optional[int] = None,
                 rope_pt_seq_len: float = 16,
                 rope_theta: float = 10000.,
                 sub_ln: bool = True,
                 qkv_bias: bool = True,
                 norm_cfg: dict = dict(type='LN', eps=1e-6),
                 drop_rate: float = 0.,
                 attn_drop_rate: float = 0.,
                 drop_path_rate: float = 0.,
                 layer_cfgs: Union[dict, Sequence[dict], None] = None,
                 **kwargs) -> None:
        for key in ('pre_norm', 'final_norm', 'with_cls_token'):
            if key in kwargs:
                raise ValueError(f'EVA02CLIPViT fixes {key}; do not pass it')
        settings = self._arch_settings(arch)
        if img_size is None:
            img_size = settings.get('img_size', 224)
        if patch_size is None:
            patch_size = settings.get('patch_size', 16)
        super().__init__(
            arch=arch,
            img_size=img_size,
            patch_size=patch_size,
            drop_rate=drop_rate,
            norm_cfg=norm_cfg,
            pre_norm=False,
            final_norm=True,
            with_cls_token=True,
            **kwargs)
        self.num_heads = self.arch_settings['num_heads']
        self.rope_pt_seq_len = rope_pt_seq_len
        self.rope_theta = rope_theta
        # The parent built mmpretrain encoder layers; EVA's replace them.
        self.replace_layers(
            EVA02CLIPLayer,
            layer_cfgs,
            drop_path_rate,
            qkv_bias=qkv_bias,
            sub_ln=sub_ln,
            norm_cfg=norm_cfg,
            drop_rate=drop_rate,
            attn_drop_rate=attn_drop_rate)
        # Validate the RoPE settings once, at the pre-training grid.
        eva_rope_table(self.patch_resolution,
                       self.embed_dims // self.num_heads, rope_pt_seq_len,
                       rope_theta)
        output_dims = self.output_dims_of(output_dims)
        self.head = (
            nn.Linear(self.embed_dims, output_dims)
            if output_dims is not None else None)
        self.output_dims = output_dims

    @classmethod
    def _arch_settings(cls, arch: Union[str, dict]) -> dict:
        if isinstance(arch, str):
            key = arch.lower()
            if key not in cls.arch_zoo:
                raise KeyError(f'arch {arch!r} is not in {set(cls.arch_zoo)}')
            return cls.arch_zoo[key]
        if not isinstance(arch, dict):
            raise TypeError(f'arch must be a str or dict, got {type(arch)}')
        return arch

    def rope_table(self, hw: Tuple[int, int], ref: Tensor) -> RopeTable:
        """RoPE ``(cos, sin)`` for grid ``hw`` on ``ref``'s device."""
        return eva_rope_table(hw, self.embed_dims // self.num_heads,
                              self.rope_pt_seq_len, self.rope_theta,
                              ref.device)

    def layer_args(self, hw: Tuple[int, int], tokens: Tensor) -> tuple:
        """EVA's blocks receive the RoPE table of the input's grid."""
        return (self.rope_table(hw, tokens), )

    OUTPUT_HEAD = 'head'

    def embed_global(self, token: Tensor) -> Tensor:
        """Project ``(..., C)`` tokens with ``head`` (joint space)."""
        if self.head is None:
            return token
        return self.head(token)

    def expected_unused_keys(self) -> Dict[str, str]:
        """As the parent, plus ``head`` when ``output_dims`` is None."""
        unused = super().expected_unused_keys()
        if self.head is None:
            unused['head'] = 'output_dims=None builds no head'
        return unused

    def value_path_block(self, tokens: Tensor) -> Tensor:
        """The last layer with its attention replaced by the value path
        (``proj(sub_norm(v_proj(x)))``, no query-key mixing, so no RoPE),
        residuals and MLP kept, no final norm: CLIPSelf's
        ``forward_without_attn`` (https://arxiv.org/abs/2310.01403)."""
        return self.layers[-1].forward_value_path(tokens)
