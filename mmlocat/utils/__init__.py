from .safe_load import (history_buffer_for_saving, mmengine_checkpoint_globals,
                        mmengine_checkpoint_safe_globals)

__all__ = [
    'history_buffer_for_saving', 'mmengine_checkpoint_globals',
    'mmengine_checkpoint_safe_globals'
]
