"""Inference for people: images -> predictions, JSON and PNG pictures."""
from .images import collect_images, read_image_rgb
from .inferencer import MMLocatInferencer, TaskHandler
from .tasks import INFERENCE_TASKS, task_handler
from .vocabulary import apply_vocabulary, parse_vocabulary

__all__ = [
    'MMLocatInferencer', 'TaskHandler', 'INFERENCE_TASKS', 'task_handler',
    'collect_images', 'read_image_rgb', 'parse_vocabulary', 'apply_vocabulary'
]
