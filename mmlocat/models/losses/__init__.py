from .clip_loss import CLIPContrastiveLoss, gather_features

__all__ = ['CLIPContrastiveLoss', 'gather_features']
