from .hooks import *  # noqa: F401,F403
from .loops import *  # noqa: F401,F403
from .model_wrappers import *  # noqa: F401,F403
from .optimizers import *  # noqa: F401,F403
from .runner import *  # noqa: F401,F403
from .runtime import *  # noqa: F401,F403
