"""Pictures: the one class palette, PNG panels of the analysis tools and,
where mmseg is installed, its ``SegLocalVisualizer`` with a legend
(:data:`mmlocat.registry.VISUALIZERS`)."""
from mmlocat.utils.hosts import is_installed
from .palette import class_palette
from .panels import colorize_labels, heatmap_overlay, save_grid, save_panels

__all__ = [
    'heatmap_overlay', 'colorize_labels', 'save_panels', 'save_grid',
    'class_palette'
]

if is_installed('mmseg'):
    from .seg_visualizer import SegLegendVisualizer  # noqa: F401
    __all__ += ['SegLegendVisualizer']
