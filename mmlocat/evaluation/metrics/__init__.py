from .corloc import CorLoc
from .pib import PointInBox

__all__ = ['PointInBox', 'CorLoc']
