"""Checkpoint converters (pure functions on state dicts)."""
from .clip import convert_clip
from .clipself_fvit import (FViTWeights, clipself_fvit_weights,
                            convert_clipself_fvit)
from .dino import (DINO_CHECKPOINT_KEYS, DinoWeights, convert_dino,
                   dino_backbone_weights)
from .eva02_clip import convert_eva02_clip
from .last_vit import convert_torchvision_vit
from .locat import (GAUG_KEY, convert_timm_locat, convert_vit_to_locat,
                    detect_vit_format)

__all__ = [
    'GAUG_KEY', 'detect_vit_format', 'convert_timm_locat',
    'convert_vit_to_locat', 'convert_torchvision_vit', 'convert_clip',
    'convert_dino', 'convert_eva02_clip', 'dino_backbone_weights',
    'DinoWeights', 'DINO_CHECKPOINT_KEYS', 'convert_clipself_fvit',
    'clipself_fvit_weights', 'FViTWeights'
]
