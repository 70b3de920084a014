"""mmseg's ``SegLocalVisualizer`` with a legend of the classes drawn.

The host draws each class's mask and writes its name from one point of
the mask (mmseg 1.2.2: a pixel of the row where the class is widest,
the box extending right and down); with many small regions the names
overlap into walls of tags, cross other classes and are cut off at the
image's edges. This subclass draws the host's masks, its own region
labels (:func:`~mmlocat.visualization.labels.region_label_boxes`: each
inside its region, inside the image, none over another) and a legend
(colour swatch and class name of every class present, largest area
first) in a strip to the right of each panel. It is the visualizer of mmlocat's
segmentation configs, so ``tools/test.py --show-dir`` and
``tools/infer.py`` / :class:`mmlocat.apis.MMLocatInferencer` draw alike.
"""
from typing import List, Optional

import numpy as np
from mmengine.structures import PixelData
from mmseg.visualization import SegLocalVisualizer

from mmlocat.registry import VISUALIZERS
from .labels import class_legend, draw_region_labels

__all__ = ['SegLegendVisualizer']


@VISUALIZERS.register_module()
class SegLegendVisualizer(SegLocalVisualizer):
    """``SegLocalVisualizer`` plus a legend strip right of each panel.

    Args:
        name: The instance name (mmengine ``ManagerMixin``).
        legend: Draw the legend and mmlocat's region labels (False:
            exactly the host's picture).
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
        if not self.legend:
            return super()._draw_sem_seg(image, sem_seg, classes, palette,
                                         with_labels)
        # the host's masks, without its labels
        drawn = super()._draw_sem_seg(
            image, sem_seg, classes, palette, with_labels=False)
        labels = np.asarray(sem_seg.cpu().data)[0]
        if with_labels:
            drawn = draw_region_labels(drawn, labels, classes, palette)
        strip = class_legend([labels], classes, palette, drawn.shape[0])
        out = np.concatenate([drawn, strip], axis=1)
        self.set_image(out)
        return out
