from .panels import colorize_labels, heatmap_overlay, save_grid, save_panels
from .predictions import (draw_classification, draw_detection,
                          draw_segmentation, label_colors)

__all__ = [
    'heatmap_overlay', 'colorize_labels', 'save_panels', 'save_grid',
    'draw_classification', 'draw_segmentation', 'draw_detection',
    'label_colors'
]
