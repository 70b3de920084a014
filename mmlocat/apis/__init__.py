"""Inference for people: images -> predictions, JSON and PNG pictures."""
from .images import collect_images, read_image_rgb
from .inferencer import (TASK_HANDLERS, MMLocatInferencer, TaskHandler,
                         register_task, task_handler)
from .vocabulary import apply_vocabulary, parse_vocabulary

__all__ = [
    'MMLocatInferencer', 'TaskHandler', 'TASK_HANDLERS', 'register_task',
    'task_handler', 'collect_images', 'read_image_rgb', 'parse_vocabulary',
    'apply_vocabulary'
]
