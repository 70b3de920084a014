"""The segmentation probe head of the LocAtViT / LaSt-ViT papers.

Locality-Attending Vision Transformer (https://arxiv.org/abs/2603.04892)
evaluates dense features with a frozen backbone and a light head on the
last block's stride-16 map: 1x1 conv to 512 channels, GroupNorm with one
group, GELU, then a 1x1 classifier.
"""
from typing import List

from mmcv.cnn import ConvModule
from mmseg.models.decode_heads.decode_head import BaseDecodeHead
from torch import Tensor

from mmlocat.registry import MODELS

__all__ = ['SegProbeHead']


@MODELS.register_module()
class SegProbeHead(BaseDecodeHead):
    """1x1 conv + GroupNorm(1) + GELU + 1x1 classifier.

    Args:
        in_channels: Channels of the backbone feature map.
        channels: Hidden channels. Defaults to 512 (the papers' value).
        **kwargs: Other :class:`BaseDecodeHead` arguments (``num_classes``,
            ``in_index``, ``loss_decode`` ...). ``norm_cfg`` defaults to one
            group GroupNorm and ``act_cfg`` to GELU; ``dropout_ratio`` to 0.
    """

    def __init__(self,
                 in_channels: int,
                 channels: int = 512,
                 norm_cfg: dict = dict(
                     type='GN', num_groups=1, requires_grad=True),
                 act_cfg: dict = dict(type='GELU'),
                 dropout_ratio: float = 0.,
                 **kwargs) -> None:
        super().__init__(
            in_channels,
            channels,
            norm_cfg=norm_cfg,
            act_cfg=act_cfg,
            dropout_ratio=dropout_ratio,
            **kwargs)
        self.proj = ConvModule(
            self.in_channels,
            self.channels,
            kernel_size=1,
            conv_cfg=self.conv_cfg,
            norm_cfg=self.norm_cfg,
            act_cfg=self.act_cfg)

    def forward(self, inputs: List[Tensor]) -> Tensor:
        """Logits at the feature map's resolution."""
        return self.cls_seg(self.proj(self._transform_inputs(inputs)))
