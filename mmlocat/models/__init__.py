"""Models: pure-torch layers, backbones, necks and host-specific heads.

Imported lazily by :data:`mmlocat.registry.MODELS`. Parts that need
mmsegmentation or mmdetection are imported only when those hosts are
installed, so the backbones work with mmpretrain alone.
"""
import importlib.util

from .backbones import *  # noqa: F401,F403
from .layers import *  # noqa: F401,F403
from .necks import *  # noqa: F401,F403

if importlib.util.find_spec('mmseg') is not None:
    from .seg import *  # noqa: F401,F403
if importlib.util.find_spec('mmdet') is not None:
    from .det import *  # noqa: F401,F403
