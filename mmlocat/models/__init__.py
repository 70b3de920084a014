"""Models: pure-torch layers, backbones, necks and host-specific heads.

Imported lazily by :data:`mmlocat.registry.MODELS`. Parts that need
mmsegmentation or mmdetection are imported only when those hosts are
installed, so the backbones work with mmpretrain alone.
"""
from mmlocat.utils.hosts import is_installed
from .backbones import *  # noqa: F401,F403
from .classifiers import *  # noqa: F401,F403
from .clip import *  # noqa: F401,F403
from .layers import *  # noqa: F401,F403
from .losses import *  # noqa: F401,F403
from .necks import *  # noqa: F401,F403

if is_installed('mmseg'):
    from .seg import *  # noqa: F401,F403
if is_installed('mmdet'):
    from .det import *  # noqa: F401,F403
