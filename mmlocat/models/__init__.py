"""Models: pure-torch layers, backbones, necks and host-specific heads.

Imported lazily by :data:`mmlocat.registry.MODELS`. Parts that need
mmsegmentation or mmdetection are imported only when those hosts are
installed, so the backbones work with mmpretrain alone.
"""
import importlib.util

from .backbones import *  # noqa: F401,F403
from .classifiers import *  # noqa: F401,F403
from .layers import *  # noqa: F401,F403
from .necks import *  # noqa: F401,F403


def _host_installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):  # e.g. sys.modules[package] is None
        return False


if _host_installed('mmseg'):
    from .seg import *  # noqa: F401,F403
if _host_installed('mmdet'):
    from .det import *  # noqa: F401,F403
