from .safe_load import allow_mmengine_checkpoint_globals

__all__ = ['allow_mmengine_checkpoint_globals']
