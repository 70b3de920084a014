"""mmdet's ``RPNHead`` with normalised convolutions.

CLIPSelf's F-ViT (https://arxiv.org/abs/2310.01403) runs its OV-LVIS RPN
with a norm layer after each of the two shared convolutions
(``CustomRPNHead(norm_cfg=...)``); mmdet 3's ``RPNHead`` has no
``norm_cfg``.
"""
from typing import Optional

from mmcv.cnn import ConvModule
from mmdet.models.dense_heads import RPNHead
from torch import nn

from mmlocat.registry import MODELS

__all__ = ['NormRPNHead']


@MODELS.register_module()
class NormRPNHead(RPNHead):
    """``RPNHead`` whose shared convolutions (``num_convs > 1``) are
    conv + norm + ReLU blocks.

    Args:
        norm_cfg: Norm of each shared convolution (e.g. ``SyncBN``); None
            is mmdet's ``RPNHead``.
        **kwargs: :class:`RPNHead` arguments.
    """

    def __init__(self, norm_cfg: Optional[dict] = None, **kwargs) -> None:
        # Read by _init_layers, which the parent's __init__ calls.
        self.norm_cfg = norm_cfg
        super().__init__(**kwargs)

    def _init_layers(self) -> None:
        super()._init_layers()
        if self.norm_cfg is None or self.num_convs <= 1:
            return
        self.rpn_conv = nn.Sequential(*[
            ConvModule(
                self.in_channels if i == 0 else self.feat_channels,
                self.feat_channels,
                3,
                padding=1,
                inplace=False,
                norm_cfg=self.norm_cfg) for i in range(self.num_convs)
        ])
