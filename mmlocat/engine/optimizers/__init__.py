from .layer_decay_constructor import LayerDecayOptimWrapperConstructor
from .summarised_constructor import SummarisedOptimWrapperConstructor

__all__ = [
    'LayerDecayOptimWrapperConstructor', 'SummarisedOptimWrapperConstructor'
]
