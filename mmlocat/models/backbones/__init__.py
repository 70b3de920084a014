from .clip_vit import CLIPViT
from .eva02_clip_vit import EVA02CLIPViT
from .last_vit import LaStViT
from .locat_vit import LocAtViT
from .pos_embed import resample_abs_pos_embed
from .vit_init import TimmViTInit, TorchvisionViTInit

__all__ = [
    'LocAtViT', 'resample_abs_pos_embed', 'LaStViT', 'CLIPViT', 'EVA02CLIPViT',
    'TimmViTInit', 'TorchvisionViTInit'
]
