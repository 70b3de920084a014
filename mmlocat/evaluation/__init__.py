from .metrics import *  # noqa: F401,F403
from .metrics import __all__ as _metrics_all

__all__ = [*_metrics_all]
