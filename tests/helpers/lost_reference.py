"""LOST's CorLoc evaluation, transcribed for the tests from its code.

Source: github valeoai/LOST (Apache-2.0), ``main_lost.py`` (the padding
before the forward pass, the counting loop), ``object_discovery.py``
(``detect_box``), ``datasets.py`` (``extract_gt_VOC``, ``extract_gt_COCO``,
``bbox_iou``). Restated here in LOST's own shape and number types (numpy
int64 boxes turned into torch tensors, a float32 IoU with its 1e-7 terms,
``scipy.ndimage.label`` with its default structure), without reading
mmlocat's implementation. The one input LOST does not have is the mask:
here the paper's ``s > mean(s) + std(s)`` of a patch-score map stands in
for LOST's ``M > 0`` and the seed is the highest-scoring patch
(``torch.argmax``: the first maximum).
"""
import numpy as np
import scipy.ndimage
import torch

__all__ = [
    'pad_like_lost', 'lost_box', 'lost_iou', 'lost_voc_gt', 'lost_coco_gt',
    'lost_corloc'
]


def pad_like_lost(img: torch.Tensor, patch_size: int) -> torch.Tensor:
    """``(3, H, W)`` normalised image -> zeros at the bottom / right up to
    the next multiple of ``patch_size`` (``main_lost.py``)."""
    channels, height, width = img.shape
    padded = torch.zeros(channels,
                         int(np.ceil(height / patch_size) * patch_size),
                         int(np.ceil(width / patch_size) * patch_size))
    padded[:, :height, :width] = img
    return padded


def lost_box(score: np.ndarray, patch_size: int, image_hw):
    """``detect_box`` on the patch-score mask: int64 ``[x1, y1, x2, y2]``.

    ``score`` is the ``(rows, cols)`` map of the padded image; LOST names
    the rows ``w_featmap`` and the columns ``h_featmap``.
    """
    w_featmap, h_featmap = score.shape
    flat = torch.from_numpy(score).reshape(-1)
    threshold = flat.mean() + flat.std(unbiased=False)
    affinity = flat - threshold  # LOST keeps the cells with A > 0
    seed = torch.argmax(flat)
    correl = affinity.reshape(w_featmap, h_featmap).float()
    labeled, _ = scipy.ndimage.label(correl.numpy() > 0.0)
    component = labeled[np.unravel_index(seed.numpy(), (w_featmap, h_featmap))]
    if component == 0:
        raise ValueError('The seed is in the background component.')
    where = np.where(labeled == component)
    ymin, ymax = min(where[0]), max(where[0]) + 1
    xmin, xmax = min(where[1]), max(where[1]) + 1
    scales = [patch_size, patch_size]
    pred = [
        scales[1] * xmin, scales[0] * ymin, scales[1] * xmax, scales[0] * ymax
    ]
    # clipped to the image before padding (init_image_size[1:] = H, W)
    pred[2] = min(pred[2], image_hw[1])
    pred[3] = min(pred[3], image_hw[0])
    return np.asarray(pred)


def lost_iou(box1: torch.Tensor, box2: torch.Tensor, eps: float = 1e-7):
    """``bbox_iou(box1, box2)`` with ``x1y1x2y2=True`` and no G/D/C IoU."""
    box2 = box2.T
    inter = (torch.min(box1[2], box2[2]) -
             torch.max(box1[0], box2[0])).clamp(0) * (torch.min(
                 box1[3], box2[3]) - torch.max(box1[1], box2[1])).clamp(0)
    w1, h1 = box1[2] - box1[0], box1[3] - box1[1] + eps
    w2, h2 = box2[2] - box2[0], box2[3] - box2[1] + eps
    union = w1 * h1 + w2 * h2 - inter + eps
    return inter / union


def lost_voc_gt(objects) -> np.ndarray:
    """``extract_gt_VOC`` without ``remove_hards``: every object, the XML's
    integer strings read with ``int`` and ``xmin``, ``ymin`` minus 1."""
    boxes = []
    for obj in objects:
        box = [int(obj[k]) for k in ('xmin', 'ymin', 'xmax', 'ymax')]
        box[0] -= 1
        box[1] -= 1
        boxes.append(box)
    return np.asarray(boxes)


def lost_coco_gt(annotations) -> np.ndarray:
    """``extract_gt_COCO(remove_iscrowd=True)``: crowd dropped, corners
    rounded with Python's ``round``."""
    boxes = []
    for ann in annotations:
        if ann['iscrowd'] == 1:
            continue
        x, y, w, h = ann['bbox']
        boxes.append([int(round(v)) for v in (x, y, x + w, y + h)])
    return np.asarray(boxes)


def lost_corloc(items, patch_size: int = 16):
    """``main_lost.py``'s loop over ``(score, gt, (H, W))`` items: a hit
    if any IoU >= 0.5; every image counts. Returns (CorLoc, hits)."""
    corloc = np.zeros(len(items))
    count = 0
    for index, (score, gt, image_hw) in enumerate(items):
        pred = lost_box(score, patch_size, image_hw)
        ious = lost_iou(torch.from_numpy(pred), torch.from_numpy(gt))
        if torch.any(ious >= 0.5):
            corloc[index] = 1
        count += 1
    return np.sum(corloc) / count, corloc.astype(bool)
