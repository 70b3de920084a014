"""mmlocat: locality-aware ViTs for mmpretrain, mmsegmentation and mmdet.

Importing the package is cheap and changes nothing outside it: it creates
the registry nodes (model code is imported lazily by the registries).
"""
from .registry import (DATASETS, HOOKS, METRICS, MODELS,
                       OPTIM_WRAPPER_CONSTRUCTORS, TRANSFORMS, VISUALIZERS)
from .version import __version__

__all__ = [
    '__version__', 'MODELS', 'DATASETS', 'TRANSFORMS', 'METRICS', 'HOOKS',
    'OPTIM_WRAPPER_CONSTRUCTORS', 'VISUALIZERS'
]
