"""mmlocat: locality-aware ViTs for mmpretrain, mmsegmentation and mmdet.

Importing the package is cheap: it creates the registry node (model code is
imported lazily by the registries) and allow-lists the objects mmengine puts
into its own checkpoints, so ``--resume`` / ``load_from`` work under torch's
weights-only loading.
"""
from .registry import (DATASETS, HOOKS, METRICS, MODELS,
                       OPTIM_WRAPPER_CONSTRUCTORS, TRANSFORMS, VISUALIZERS)
from .utils.safe_load import allow_mmengine_checkpoint_globals
from .version import __version__

allow_mmengine_checkpoint_globals()

__all__ = [
    '__version__', 'MODELS', 'DATASETS', 'TRANSFORMS', 'METRICS', 'HOOKS',
    'OPTIM_WRAPPER_CONSTRUCTORS', 'VISUALIZERS'
]
