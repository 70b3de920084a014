from .contrastive import CLIPContrastive
from .text_tower import OpenCLIPTextTower, build_open_clip_model

__all__ = ['CLIPContrastive', 'OpenCLIPTextTower', 'build_open_clip_model']
