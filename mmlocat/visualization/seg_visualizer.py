"""mmseg's ``SegLocalVisualizer`` with a legend of the classes drawn.

The host draws each class's mask and writes its name at one point of the
mask; with many small regions the names overlap or are cut off. This
subclass draws exactly what the host draws and puts a legend (colour
swatch and class name of every class present, largest area first) in a
strip to the right of each panel. It is the visualizer of mmlocat's
segmentation configs, so ``tools/test.py --show-dir`` and
``tools/infer.py`` / :class:`mmlocat.apis.MMLocatInferencer` draw alike.
"""
from typing import List, Optional

import cv2
import numpy as np
from mmengine.structures import PixelData
from mmseg.visualization import SegLocalVisualizer

from mmlocat.registry import VISUALIZERS

__all__ = ['SegLegendVisualizer']

#: Legend row height (pixels) and cv2 font scale for panels up to
#: :data:`_BASE_HEIGHT` pixels high; taller panels scale both.
_ROW, _FONT, _BASE_HEIGHT = 16, 0.4, 400


@VISUALIZERS.register_module()
class SegLegendVisualizer(SegLocalVisualizer):
    """``SegLocalVisualizer`` plus a legend strip right of each panel.

    Args:
        name: The instance name (mmengine ``ManagerMixin``).
        legend: Draw the legend (False: exactly the host's picture).
        **kwargs: The other arguments of ``SegLocalVisualizer`` (``alpha``,
            ``classes``, ``palette``, ``vis_backends``, ``save_dir``, ...).
    """

    def __init__(self,
                 name: str = 'visualizer',
                 legend: bool = True,
                 **kwargs) -> None:
        super().__init__(name=name, **kwargs)
        self.legend = legend

    def _draw_sem_seg(self,
                      image: np.ndarray,
                      sem_seg: PixelData,
                      classes: Optional[List],
                      palette: Optional[List],
                      with_labels: Optional[bool] = True) -> np.ndarray:
        drawn = super()._draw_sem_seg(image, sem_seg, classes, palette,
                                      with_labels)
        if not self.legend:
            return drawn
        labels = np.asarray(sem_seg.cpu().data)[0]
        ids, counts = np.unique(labels, return_counts=True)
        keep = ids < len(classes)  # the host leaves other labels undrawn
        ids = ids[keep][np.argsort(-counts[keep], kind='stable')]
        strip = legend_strip([str(classes[i]) for i in ids],
                             [palette[i] for i in ids], drawn.shape[0])
        out = np.concatenate([drawn, strip], axis=1)
        self.set_image(out)
        return out


def legend_strip(names: List[str], colors: List, height: int) -> np.ndarray:
    """A white ``(height, W, 3)`` RGB strip: a swatch and a name per row,
    as many rows as fit (the last says how many more there are)."""
    scale = max(1, int(round(height / _BASE_HEIGHT)))
    row, font, thick = _ROW * scale, _FONT * scale, scale
    fit = max(1, (height - row // 2) // row)
    if len(names) > fit:
        more = len(names) - fit + 1
        names, colors = names[:fit - 1], colors[:fit - 1]
        names = names + [f'+{more} more']
        colors = colors + [None]
    face = cv2.FONT_HERSHEY_SIMPLEX
    text_w = max([cv2.getTextSize(n, face, font, thick)[0][0]
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
        cv2.putText(strip, name, (x + row, top + row - 5 * scale), face, font,
                    (0, 0, 0), thick, cv2.LINE_AA)
    return strip
