"""The shared base of mmlocat's CLIP image towers (CLIPViT, EVA02CLIPViT).

A :class:`~.vit_base.TokenLoopViT` (global token by ``pooling``,
default LazyStrike) whose global token and patch tokens are mapped to the
joint image-text space by :meth:`CLIPTower.embed_global`, with F-ViT's
dense CLIP map (CLIPSelf, https://arxiv.org/abs/2310.01403): the last
block's value path
(:meth:`CLIPTower.value_path_block`), its projected unit-norm patch
embeddings and the one-pass taps of :meth:`CLIPTower.forward_dense`. A
tower defines only its layout: ``embed_global``, ``value_path_block`` and
the name of its output projection (``OUTPUT_HEAD``, for layer-wise lr
decay).
"""
from typing import Optional, Tuple

import torch.nn.functional as F
from torch import Tensor

from .vit_archs import VIT_ARCHS
from .vit_base import TokenLoopViT

__all__ = ['CLIPTower', 'clip_archs']


def clip_archs(b: dict, l: dict) -> dict:  # noqa: E741
    """A tower's ``arch_zoo``: ``'b'``/``'base'`` and ``'l'``/``'large'``
    of the shared table (:data:`~.vit_archs.VIT_ARCHS`), updated with the
    tower's own entries (``output_dims``, ...)."""
    return {
        **dict.fromkeys(['b', 'base'], {
                            **VIT_ARCHS['b'],
                            **b
                        }),
        **dict.fromkeys(['l', 'large'], {
                            **VIT_ARCHS['l'],
                            **l
                        }),
    }


class CLIPTower(TokenLoopViT):
    """Base of the CLIP image towers: joint-space outputs, dense map.

    Not registered: build :class:`~.clip_vit.CLIPViT` or
    :class:`~.eva02_clip_vit.EVA02CLIPViT`. The global token is pooled
    after the final norm (open_clip's ``ln_post``) and then projected;
    ``pooling`` defaults to ``'lazy_strike'`` (LaSt-CLIP), ``'cls'`` is
    open_clip's own token.
    """
    DEFAULT_POOLING = 'lazy_strike'
    #: Name of the output projection (a parameter or a module).
    OUTPUT_HEAD: str = ''

    def output_dims_of(self, output_dims: Optional[int]) -> Optional[int]:
        """``output_dims``, or the arch's (``None``: no projection)."""
        if output_dims is None:
            return self.arch_settings.get('output_dims')
        return output_dims

    def value_path_block(self, tokens: Tensor) -> Tensor:
        """The last block with its attention replaced by the value path
        (no query-key mixing), residuals and MLP kept, no final norm.

        Args:
            tokens: ``(B, L, C)`` input of the last block.

        Returns:
            ``(B, L, C)`` tokens.
        """
        raise NotImplementedError

    def dense_embeddings(self, tokens: Tensor, hw: Tuple[int, int]) -> Tensor:
        """``(B, D, h, w)`` unit-norm projected patch embeddings of the
        value-path tokens: final norm, output projection, L2 norm."""
        x = self.ln1(tokens)
        patches = F.normalize(
            self.embed_global(x[:, self.num_extra_tokens:]), dim=-1)
        return patches.transpose(1, 2).reshape(patches.shape[0], -1, *hw)

    def value_path_dense(self, tokens: Tensor, hw: Tuple[int, int]) -> Tensor:
        """F-ViT's dense CLIP map from the tokens entering the last block.

        :meth:`value_path_block`, then :meth:`dense_embeddings`.

        Args:
            tokens: ``(B, L, C)`` input of the last block (prefix tokens
                first).
            hw: Patch grid ``(h, w)``.

        Returns:
            ``(B, D, h, w)`` unit-norm patch embeddings.
        """
        return self.dense_embeddings(self.value_path_block(tokens), hw)

    def forward_dense(
        self,
        x: Tensor,
        value_path_tap: bool = False,
        check_finite: Optional[bool] = None
    ) -> Tuple[Tuple[Tensor, ...], Tensor]:
        """:meth:`forward`'s outputs plus :meth:`value_path_dense`'s map,
        from one pass through the network.

        Args:
            x: ``(B, 3, H, W)`` images.
            value_path_tap: Output the last layer's tap as F-ViT does: the
                value-path tokens (:meth:`value_path_block`) without the
                final norm, instead of the ordinary last block + final norm.
            check_finite: As in :meth:`forward`.
        """
        check = self.checks_finite(check_finite)
        last = len(self.layers) - 1
        before_last = last - 1
        if before_last < 0:
            raise ValueError('the dense CLIP map needs at least 2 layers')
        indices = set(self.out_indices) | {before_last}
        if value_path_tap:
            indices.discard(last)
        indices = sorted(indices)
        kept, hw = self.forward_intermediates(x, indices, check)
        by_index = dict(zip(indices, kept))
        value_tokens = self.value_path_block(by_index[before_last])
        if value_path_tap:
            by_index[last] = value_tokens
        outs = tuple(
            self._format_output(by_index[i], hw, check)
            for i in self.out_indices)
        return outs, self.dense_embeddings(value_tokens, hw)

    def get_layer_depth(self, param_name: str, prefix: str = ''):
        """Layer depth for layer-wise lr decay; the output projection is
        the last."""
        name = prefix + self.OUTPUT_HEAD
        if param_name == name or param_name.startswith(name + '.'):
            return self.num_layers + 1, self.num_layers + 2
        return super().get_layer_depth(param_name, prefix)
