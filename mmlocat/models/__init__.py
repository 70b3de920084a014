"""Models: pure-torch layers, backbones, necks and host-specific heads.

Imported by :data:`mmlocat.registry.MODELS` (its location), which registers
everything below. Each part is imported only when the hosts it builds on
are installed: :mod:`.layers` needs torch alone, :mod:`.clip` and
:mod:`.losses` mmengine, the backbones, necks and classifiers mmcv +
mmpretrain, :mod:`.seg` mmseg and :mod:`.det` mmdet. So
``import mmlocat.models.layers`` works without any OpenMMLab host.
"""
from mmlocat.utils.hosts import is_installed
from .clip import *  # noqa: F401,F403
from .layers import *  # noqa: F401,F403
from .losses import *  # noqa: F401,F403

if is_installed('mmcv') and is_installed('mmpretrain'):
    from .backbones import *  # noqa: F401,F403
    from .classifiers import *  # noqa: F401,F403
    from .necks import *  # noqa: F401,F403
if is_installed('mmseg'):
    from .seg import *  # noqa: F401,F403
if is_installed('mmdet'):
    from .det import *  # noqa: F401,F403
