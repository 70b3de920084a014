"""Open-vocabulary detection on mmdet 3.x (F-ViT); needs mmdet."""
from .cosine_bbox_head import CosineSimBBoxHead
from .fvit import FViT
from .fvit_roi_head import FViTRoIHead
from .norm_rpn_head import NormRPNHead
from .ov_cross_entropy_loss import OVCrossEntropyLoss
from .square_pad_preprocessor import SquarePadDetDataPreprocessor

__all__ = [
    'FViT', 'FViTRoIHead', 'CosineSimBBoxHead', 'OVCrossEntropyLoss',
    'SquarePadDetDataPreprocessor', 'NormRPNHead'
]
