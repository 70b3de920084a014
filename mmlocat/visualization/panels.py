"""Side-by-side PNG panels: images, label maps and score heat maps.

Shared by the demo and the analysis tools; numpy, OpenCV and matplotlib
only (Agg backend, no display needed).
"""
from typing import Optional, Sequence, Tuple

import cv2
import numpy as np

__all__ = ['heatmap_overlay', 'colorize_labels', 'save_panels', 'save_grid']


def heatmap_overlay(img_rgb: np.ndarray,
                    heat: np.ndarray,
                    alpha: float = 0.5) -> np.ndarray:
    """Blend a min-max normalised jet heat map onto an RGB image.

    Args:
        img_rgb: (H, W, 3) uint8 image.
        heat: (h, w) scores on any grid; upsampled with nearest neighbours
            so that each patch stays a visible cell.
        alpha: Weight of the heat map.

    Returns:
        The (H, W, 3) uint8 blend. A constant map blends as all-minimum.
    """
    import matplotlib
    matplotlib.use('Agg')
    from matplotlib import colormaps

    heat = np.asarray(heat, dtype=np.float32)
    span = float(heat.max() - heat.min())
    heat = (heat - heat.min()) / span if span > 0 else np.zeros_like(heat)
    heat = cv2.resize(
        heat, (img_rgb.shape[1], img_rgb.shape[0]),
        interpolation=cv2.INTER_NEAREST)
    colored = colormaps['jet'](heat)[..., :3] * 255
    blend = (1 - alpha) * img_rgb.astype(np.float32) + alpha * colored
    return blend.clip(0, 255).astype(np.uint8)


def colorize_labels(labels: np.ndarray,
                    palette: Sequence[Sequence[int]],
                    ignore_index: int = 255) -> np.ndarray:
    """Map a (H, W) label map to RGB with ``palette``; ignore is black."""
    palette = np.asarray(palette, dtype=np.uint8)
    out = np.zeros(labels.shape + (3, ), dtype=np.uint8)
    valid = (labels != ignore_index) & (labels < len(palette))
    out[valid] = palette[labels[valid]]
    return out


def save_panels(panels: Sequence[Tuple[str, np.ndarray]],
                out_file: str,
                title: Optional[str] = None) -> None:
    """Save titled RGB panels side by side to a PNG file."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        1, len(panels), figsize=(3.2 * len(panels), 3.6), squeeze=False)
    for ax, (name, panel) in zip(axes[0], panels):
        ax.imshow(panel)
        ax.set_title(name, fontsize=9)
        ax.axis('off')
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(out_file, dpi=100)
    plt.close(fig)


def save_grid(rows: Sequence[Sequence[Tuple[str, np.ndarray]]],
              out_file: str,
              row_labels: Optional[Sequence[str]] = None,
              title: Optional[str] = None,
              cell_inches: float = 1.6) -> None:
    """Save a grid of titled RGB panels (one list per row) to a PNG."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    num_cols = max(len(r) for r in rows)
    fig, axes = plt.subplots(
        len(rows),
        num_cols,
        figsize=(cell_inches * num_cols + 0.6, cell_inches * len(rows) + 0.6),
        squeeze=False)
    for i, row in enumerate(rows):
        for j in range(num_cols):
            ax = axes[i][j]
            ax.set_xticks([])
            ax.set_yticks([])
            if j >= len(row):
                ax.axis('off')
                continue
            name, panel = row[j]
            ax.imshow(panel)
            ax.set_title(name, fontsize=6)
            if j == 0 and row_labels is not None:
                ax.set_ylabel(row_labels[i], fontsize=7)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(out_file, dpi=100)
    plt.close(fig)
