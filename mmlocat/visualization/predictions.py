"""PNG pictures of predictions: top-k bars, class masks, labelled boxes.

Used by ``tools/infer.py`` and :class:`mmlocat.apis.MMLocatInferencer`;
matplotlib (Agg backend) only, so no display is needed.
"""
from typing import Optional, Sequence

import numpy as np

from .panels import colorize_labels

__all__ = [
    'draw_classification', 'draw_segmentation', 'draw_detection',
    'label_colors'
]


def _pyplot():
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    return plt


def label_colors(
        num: int,
        palette: Optional[Sequence[Sequence[int]]] = None) -> np.ndarray:
    """``(num, 3)`` uint8 colours: ``palette`` if it has enough rows, else
    matplotlib's ``tab20`` cycled."""
    if palette is not None and len(palette) >= num:
        return np.asarray(palette, dtype=np.uint8)[:num]
    from matplotlib import colormaps
    cmap = colormaps['tab20']
    return (np.array([cmap(i % 20)[:3]
                      for i in range(num)]) * 255).astype(np.uint8)


def _class_name(classes: Optional[Sequence[str]], label: int) -> str:
    if classes is not None and 0 <= label < len(classes):
        return str(classes[label])
    return f'class {label}'


def draw_classification(img_rgb: np.ndarray,
                        scores: np.ndarray,
                        out_file: str,
                        classes: Optional[Sequence[str]] = None,
                        topk: int = 5,
                        title: Optional[str] = None) -> None:
    """The image next to a bar chart of the ``topk`` class scores."""
    plt = _pyplot()
    scores = np.asarray(scores, dtype=np.float64)
    order = np.argsort(-scores, kind='stable')[:topk]
    fig, (ax_img, ax_bar) = plt.subplots(
        1, 2, figsize=(7.0, 3.2), gridspec_kw=dict(width_ratios=[1, 1.2]))
    ax_img.imshow(img_rgb)
    ax_img.axis('off')
    names = [_class_name(classes, int(i)) for i in order]
    ax_bar.barh(range(len(order))[::-1], scores[order], color='tab:blue')
    ax_bar.set_yticks(range(len(order))[::-1])
    ax_bar.set_yticklabels(names, fontsize=8)
    ax_bar.set_xlim(0, max(1.0, float(scores[order].max())))
    for y, s in zip(range(len(order))[::-1], scores[order]):
        ax_bar.text(float(s), y, f' {s:.3f}', va='center', fontsize=7)
    ax_bar.set_xlabel('score', fontsize=8)
    ax_bar.set_title(f'top-{len(order)}', fontsize=9)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(out_file, dpi=100)
    plt.close(fig)


def draw_segmentation(img_rgb: np.ndarray,
                      labels: np.ndarray,
                      out_file: str,
                      classes: Optional[Sequence[str]] = None,
                      palette: Optional[Sequence[Sequence[int]]] = None,
                      alpha: float = 0.5,
                      max_legend: int = 20,
                      title: Optional[str] = None) -> None:
    """The image | the class-coloured mask over it, with a legend of the
    classes present (largest area first, at most ``max_legend``)."""
    from matplotlib.patches import Patch
    plt = _pyplot()
    labels = np.asarray(labels)
    num = max(
        len(classes) if classes is not None else 0,
        int(labels.max()) + 1 if labels.size else 0)
    colors = label_colors(num, palette)
    mask = colorize_labels(labels, colors, ignore_index=-1)
    blend = ((1 - alpha) * img_rgb.astype(np.float32) +
             alpha * mask.astype(np.float32)).clip(0, 255).astype(np.uint8)
    present, counts = np.unique(labels, return_counts=True)
    order = present[np.argsort(-counts, kind='stable')][:max_legend]
    fig, axes = plt.subplots(1, 2, figsize=(8.0, 3.4))
    for ax, (name, panel) in zip(axes, [('input', img_rgb),
                                        ('prediction', blend)]):
        ax.imshow(panel)
        ax.set_title(name, fontsize=9)
        ax.axis('off')
    handles = [
        Patch(
            color=colors[int(c)] / 255.0, label=_class_name(classes, int(c)))
        for c in order
    ]
    axes[1].legend(
        handles=handles,
        loc='center left',
        bbox_to_anchor=(1.02, 0.5),
        fontsize=7,
        frameon=False)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(out_file, dpi=100)
    plt.close(fig)


def draw_detection(img_rgb: np.ndarray,
                   bboxes: np.ndarray,
                   labels: np.ndarray,
                   scores: np.ndarray,
                   out_file: str,
                   classes: Optional[Sequence[str]] = None,
                   score_thr: float = 0.3,
                   title: Optional[str] = None) -> int:
    """Boxes with ``name score`` captions over the image; returns how many
    boxes (score >= ``score_thr``) were drawn."""
    from matplotlib.patches import Rectangle
    plt = _pyplot()
    bboxes = np.asarray(bboxes, dtype=np.float64).reshape(-1, 4)
    labels = np.asarray(labels).reshape(-1)
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    keep = scores >= score_thr
    num = len(classes) if classes is not None else int(labels.max(
        initial=-1)) + 1
    colors = label_colors(max(num, 1)) / 255.0
    h, w = img_rgb.shape[:2]
    fig, ax = plt.subplots(figsize=(6.0, 6.0 * h / max(w, 1) + 0.4))
    ax.imshow(img_rgb)
    ax.axis('off')
    for (x1, y1, x2, y2), label, score in zip(bboxes[keep], labels[keep],
                                              scores[keep]):
        color = colors[int(label) % len(colors)]
        ax.add_patch(
            Rectangle((x1, y1),
                      x2 - x1,
                      y2 - y1,
                      fill=False,
                      edgecolor=color,
                      linewidth=1.5))
        ax.text(
            x1,
            y1,
            f'{_class_name(classes, int(label))} {score:.2f}',
            fontsize=7,
            color='white',
            va='bottom',
            bbox=dict(facecolor=color, alpha=0.8, pad=1, edgecolor='none'))
    ax.set_title(
        title or f'{int(keep.sum())} boxes, score >= {score_thr}', fontsize=9)
    fig.tight_layout()
    fig.savefig(out_file, dpi=100)
    plt.close(fig)
    return int(keep.sum())
