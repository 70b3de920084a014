from .panels import colorize_labels, heatmap_overlay, save_panels

__all__ = ['heatmap_overlay', 'colorize_labels', 'save_panels']
