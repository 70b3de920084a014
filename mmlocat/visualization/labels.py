"""Text on mmlocat's pictures: region labels, the colour key, scores.

numpy and OpenCV only, shared by :class:`SegLegendVisualizer` (the
pictures of ``tools/infer.py`` and ``tools/test.py --show-dir``), the
demo's panels (:func:`mmlocat.visualization.save_panels`) and the
classification pictures of ``tools/infer.py``.
"""
from typing import List, Optional, Sequence, Tuple

import cv2
import numpy as np

__all__ = [
    'legend_strip', 'class_legend', 'region_label_boxes', 'draw_region_labels',
    'format_score'
]

#: Legend row height (pixels) and cv2 font scale for panels up to
#: :data:`_BASE_HEIGHT` pixels high; taller panels scale both.
_ROW, _FONT, _BASE_HEIGHT = 16, 0.4, 400
_FACE = cv2.FONT_HERSHEY_SIMPLEX
#: Places tried per region label, deepest inside the region first.
_TRIES = 8


def _overlap(a: Tuple[int, ...], b: Tuple[int, ...]) -> bool:
    """Whether two inclusive ``(x0, y0, x1, y1)`` boxes share a pixel."""
    return a[0] <= b[2] and b[0] <= a[2] and a[1] <= b[3] and b[1] <= a[3]


def format_score(score: float) -> str:
    """A score with 3 significant digits (``0.93``, ``0.000123``,
    ``1.2e-07``): a small score is not printed as ``0.00``."""
    return f'{float(score):.3g}'


def legend_strip(names: Sequence[str], colors: Sequence,
                 height: int) -> np.ndarray:
    """A white ``(height, W, 3)`` RGB strip: a swatch and a name per row,
    as many rows as fit (the last says how many more there are)."""
    names, colors = list(names), list(colors)
    scale = max(1, int(round(height / _BASE_HEIGHT)))
    row, font, thick = _ROW * scale, _FONT * scale, scale
    fit = max(1, (height - row // 2) // row)
    if len(names) > fit:
        more = len(names) - fit + 1
        names, colors = names[:fit - 1], colors[:fit - 1]
        names = names + [f'+{more} more']
        colors = colors + [None]
    text_w = max([cv2.getTextSize(n, _FACE, font, thick)[0][0]
                  for n in names] + [0])
    swatch = row - 4 * scale
    width = 3 * row // 2 + text_w + row // 2
    strip = np.full((height, width, 3), 255, dtype=np.uint8)
    for i, (name, color) in enumerate(zip(names, colors)):
        top = row // 4 + i * row
        x = row // 2
        if color is not None:
            cv2.rectangle(strip, (x, top + 2 * scale),
                          (x + swatch, top + 2 * scale + swatch),
                          tuple(int(c) for c in color), -1)
            cv2.rectangle(strip, (x, top + 2 * scale),
                          (x + swatch, top + 2 * scale + swatch), (0, 0, 0), 1)
        cv2.putText(strip, name, (x + row, top + row - 5 * scale), _FACE, font,
                    (0, 0, 0), thick, cv2.LINE_AA)
    return strip


def class_legend(label_maps: Sequence[np.ndarray], names: Sequence[str],
                 palette: Sequence[Sequence[int]], height: int) -> np.ndarray:
    """The :func:`legend_strip` of the classes present in ``label_maps``
    (one or more ``(H, W)`` label maps of the same classes), largest total
    area first; labels without a name (ignore) are left out."""
    ids, counts = np.unique(
        np.concatenate([np.asarray(m).ravel() for m in label_maps]),
        return_counts=True)
    keep = (ids >= 0) & (ids < len(names))
    ids = ids[keep][np.argsort(-counts[keep], kind='stable')]
    return legend_strip([str(names[i]) for i in ids],
                        [palette[i] for i in ids], height)


def _font(shape: Tuple[int, int]) -> Tuple[float, int]:
    """cv2 font scale and thickness of region labels on an image of
    ``shape``: small but legible on a 64-pixel image, growing with it."""
    scale = float(np.clip(min(shape) / 800, 0.3, 1.2))
    return scale, 1 if scale < 0.7 else 2


def region_label_boxes(
    labels: np.ndarray, names: Sequence[str]
) -> List[Tuple[int, str, Tuple[int, int], Tuple[int, int, int, int]]]:
    """Where each class's name goes on a label map: one label per class,
    largest area first, none over another or past the image's edge.

    A label is centred on its class's pixel farthest from any other class
    and from the image edge (the maximum of the distance transform of its
    mask), so it sits on its own region even when the region is split in
    parts or ring-shaped (its centroid may be another class's pixel), and
    is shifted inside the image where it would cross an edge. Where it
    would overlap a label already placed or cover more of other classes
    than of its own, the next-deepest pixel outside that box is tried; a
    label that finds no place, or is wider than the image, is left out
    (the legend names every class).

    Args:
        labels: ``(H, W)`` integer label map.
        names: Class names by label; labels without a name are skipped.

    Returns:
        ``(label, name, (x, y) anchor pixel, (x0, y0, x1, y1) box)``,
        boxes inclusive, in drawing order.
    """
    labels = np.asarray(labels)
    height, width = labels.shape
    font, thick = _font(labels.shape)
    ids, counts = np.unique(labels, return_counts=True)
    keep = (ids >= 0) & (ids < len(names))
    ids, counts = ids[keep], counts[keep]
    placed = []
    for label in ids[np.argsort(-counts, kind='stable')]:
        text = str(names[label])
        (tw, th), base = cv2.getTextSize(text, _FACE, font, thick)
        bw, bh = tw + 4, th + base + 4
        if bw > width or bh > height:
            continue
        # a zero border: the image edge counts as the region's boundary
        mask = np.pad((labels == label).astype(np.uint8), 1)
        dist = cv2.distanceTransform(mask, cv2.DIST_L2, 3)[1:-1, 1:-1]
        for _ in range(_TRIES):
            if dist.max() <= 0:
                break
            y, x = np.unravel_index(int(np.argmax(dist)), dist.shape)
            x0 = int(np.clip(x - bw // 2, 0, width - bw))
            y0 = int(np.clip(y - bh // 2, 0, height - bh))
            box = (x0, y0, x0 + bw - 1, y0 + bh - 1)
            # mostly its own class under it, over no other label
            if (labels[y0:y0 + bh, x0:x0 + bw] == label).mean() >= 0.5 \
                    and not any(_overlap(box, b) for *_, b in placed):
                placed.append((int(label), text, (int(x), int(y)), box))
                break
            dist[y0:y0 + bh, x0:x0 + bw] = 0  # the next-best place
    return placed


def draw_region_labels(image: np.ndarray,
                       labels: np.ndarray,
                       names: Sequence[str],
                       palette: Sequence[Sequence[int]],
                       boxes: Optional[list] = None) -> np.ndarray:
    """Draw :func:`region_label_boxes` on an RGB image (a copy): each name
    on a box of its class's colour, in black or white, whichever reads
    better on it."""
    out = np.ascontiguousarray(image).copy()
    font, thick = _font(out.shape[:2])
    if boxes is None:
        boxes = region_label_boxes(labels, names)
    for label, text, _, (x0, y0, x1, y1) in boxes:
        color = tuple(int(c) for c in palette[label])
        cv2.rectangle(out, (x0, y0), (x1, y1), color, -1)
        cv2.rectangle(out, (x0, y0), (x1, y1), (0, 0, 0), 1)
        luma = 0.299 * color[0] + 0.587 * color[1] + 0.114 * color[2]
        ink = (0, 0, 0) if luma > 140 else (255, 255, 255)
        (_, th), _ = cv2.getTextSize(text, _FACE, font, thick)
        cv2.putText(out, text, (x0 + 2, y0 + 2 + th), _FACE, font, ink, thick,
                    cv2.LINE_AA)
    return out
