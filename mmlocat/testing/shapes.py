"""Procedural scenes of coloured, textured shapes for tiny test datasets.

Every class id maps to one fixed look (shape + colour + texture), so a tiny
model can learn the classes from a handful of images. A scene is a noisy
background (plain, or one or two "stuff" classes) with a few objects drawn
over it; later objects occlude earlier ones and the returned instance masks
are the visible parts. Everything is drawn without anti-aliasing, so the
image, the semantic map, the instance masks and the boxes agree exactly.

Only numpy and OpenCV are used; the output depends only on the generator
passed in.
"""
import colorsys
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import cv2
import numpy as np

__all__ = [
    'SHAPES', 'TEXTURES', 'ShapeStyle', 'Scene', 'class_style', 'tight_box',
    'draw_scene'
]

SHAPES = ('ellipse', 'rectangle', 'triangle', 'star', 'diamond', 'hexagon',
          'cross', 'ring')
TEXTURES = ('solid', 'stripes', 'checker', 'dots')

# Value -1 in a semantic map: pixel of no class (plain background or an
# "other" region); writers turn it into the format's ignore value.
NO_CLASS = -1


@dataclass(frozen=True)
class ShapeStyle:
    """The fixed look of one class."""
    shape: str
    color: Tuple[int, int, int]
    texture: str


@dataclass
class Scene:
    """One generated image with all of its annotations.

    Attributes:
        image: ``(H, W, 3)`` uint8 RGB image.
        semantic: ``(H, W)`` int32 class id per pixel, -1 where no class.
        masks: ``(N, H, W)`` bool visible mask of each instance.
        labels: ``(N,)`` int64 class id of each instance.
        boxes: ``(N, 4)`` float32 tight boxes ``(x1, y1, x2, y2)`` of the
            masks in pixel-edge coordinates (``x2 = last column + 1``).
    """
    image: np.ndarray
    semantic: np.ndarray
    masks: np.ndarray
    labels: np.ndarray
    boxes: np.ndarray


def class_style(class_id: int) -> ShapeStyle:
    """Return the fixed look of ``class_id``.

    The shape cycles fastest, then the texture, so ids less than 32 apart
    differ in shape or texture; the hue steps by the golden ratio so nearby
    ids also get far-apart colours.
    """
    if class_id < 0:
        raise ValueError(f'class_id must be >= 0, got {class_id}')
    shape = SHAPES[class_id % len(SHAPES)]
    texture = TEXTURES[(class_id // len(SHAPES)) % len(TEXTURES)]
    hue = (class_id * 0.6180339887) % 1.0
    sat = (0.9, 0.65, 0.45)[class_id % 3]
    val = (0.95, 0.75, 0.55)[(class_id // 3) % 3]
    rgb = colorsys.hsv_to_rgb(hue, sat, val)
    return ShapeStyle(shape, tuple(int(round(c * 255)) for c in rgb), texture)


def tight_box(mask: np.ndarray) -> np.ndarray:
    """Tight ``(x1, y1, x2, y2)`` box of a non-empty bool mask.

    ``x2``/``y2`` are the last column/row plus one, as in mmdet.
    """
    ys, xs = np.nonzero(mask)
    if xs.size == 0:
        raise ValueError('tight_box of an empty mask')
    return np.array(
        [xs.min(), ys.min(), xs.max() + 1,
         ys.max() + 1], dtype=np.float32)


def _polygon(shape: str, cx: float, cy: float, r: float, aspect: float,
             angle: float) -> np.ndarray:
    """Vertices of a polygonal shape inside the circle of radius ``r``."""
    if shape == 'rectangle':
        t = np.arctan(aspect)
        base = np.array([t, np.pi - t, np.pi + t, 2 * np.pi - t])
        radii = np.full(4, r)
    elif shape == 'triangle':
        base = np.arange(3) * 2 * np.pi / 3
        radii = np.full(3, r)
    elif shape == 'star':
        base = np.arange(10) * np.pi / 5
        radii = np.where(np.arange(10) % 2 == 0, r, 0.45 * r)
    elif shape == 'diamond':
        base = np.arange(4) * np.pi / 2
        radii = np.array([r, r * aspect, r, r * aspect])
    elif shape == 'hexagon':
        base = np.arange(6) * np.pi / 3
        radii = np.full(6, r)
    elif shape == 'cross':
        # A plus sign: arm half-width w, arm length r.
        w = 0.35 * r
        pts = np.array([(w, w), (w, r), (-w, r), (-w, w), (-r, w), (-r, -w),
                        (-w, -w), (-w, -r), (w, -r), (w, -w), (r, -w), (r, w)])
        base = np.arctan2(pts[:, 1], pts[:, 0])
        radii = np.hypot(pts[:, 0], pts[:, 1])
    else:
        raise ValueError(f'unknown polygon shape {shape!r}')
    ang = base + angle
    xs = cx + radii * np.cos(ang)
    ys = cy + radii * np.sin(ang)
    return np.round(np.stack([xs, ys], axis=1)).astype(np.int32)


def _shape_mask(shape: str, hw: Tuple[int, int], cx: float, cy: float,
                r: float, aspect: float, angle: float) -> np.ndarray:
    """Bool mask of one shape; all of it lies within radius ``r``."""
    canvas = np.zeros(hw, dtype=np.uint8)
    center = (int(round(cx)), int(round(cy)))
    deg = float(np.degrees(angle))
    if shape in ('ellipse', 'ring'):
        axes = (max(1, int(r)), max(1, int(r * aspect)))
        cv2.ellipse(canvas, center, axes, deg, 0, 360, 1, -1, cv2.LINE_8)
        if shape == 'ring':
            inner = (max(0, int(r * 0.5)), max(0, int(r * aspect * 0.5)))
            cv2.ellipse(canvas, center, inner, deg, 0, 360, 0, -1, cv2.LINE_8)
    else:
        pts = _polygon(shape, cx, cy, r, aspect, angle)
        cv2.fillPoly(canvas, [pts], 1, cv2.LINE_8)
    return canvas.astype(bool)


def _texture(style: ShapeStyle, hw: Tuple[int, int],
             rng: np.random.Generator) -> np.ndarray:
    """``(H, W, 3)`` float texture of a class with a random phase."""
    h, w = hw
    color = np.array(style.color, dtype=np.float32)
    # The second colour is darker so the pattern survives any hue.
    dark = color * 0.45
    ys, xs = np.mgrid[0:h, 0:w]
    oy, ox = rng.integers(0, 8, size=2)
    if style.texture == 'solid':
        sel = np.zeros((h, w), dtype=bool)
    elif style.texture == 'stripes':
        sel = ((xs + ys + ox) // 3) % 2 == 1
    elif style.texture == 'checker':
        sel = (((xs + ox) // 4) + ((ys + oy) // 4)) % 2 == 1
    else:  # dots
        sel = (((xs + ox) % 5) < 2) & (((ys + oy) % 5) < 2)
    out = np.empty((h, w, 3), dtype=np.float32)
    out[:] = color
    out[sel] = dark
    return out


def _background(hw: Tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """Plain background: a low-saturation colour gradient."""
    h, w = hw
    c0 = rng.uniform(60, 200, size=3)
    c1 = c0 + rng.uniform(-40, 40, size=3)
    t = np.linspace(0.0, 1.0, w, dtype=np.float32)[None, :, None]
    grad = c0[None, None] * (1 - t) + c1[None, None] * t
    return np.broadcast_to(grad, (h, w, 3)).astype(np.float32).copy()


def _place(rng: np.random.Generator, hw: Tuple[int, int], class_id: int,
           scale_range: Tuple[float, float]) -> np.ndarray:
    """Mask of one object of ``class_id`` at a random pose."""
    h, w = hw
    r = 0.5 * rng.uniform(*scale_range) * min(h, w)
    r = max(r, 2.0)
    cx = rng.uniform(r, max(r, w - 1 - r))
    cy = rng.uniform(r, max(r, h - 1 - r))
    aspect = rng.uniform(0.6, 1.0)
    angle = rng.uniform(0, 2 * np.pi)
    return _shape_mask(
        class_style(class_id).shape, hw, cx, cy, r, aspect, angle)


def draw_scene(rng: np.random.Generator,
               img_size: Tuple[int, int],
               object_classes: Sequence[int],
               num_objects: Tuple[int, int] = (1, 3),
               stuff_classes: Optional[Sequence[int]] = None,
               scale_range: Tuple[float, float] = (0.25, 0.6),
               ignore_prob: float = 0.0,
               noise_std: float = 6.0,
               min_visible: int = 12,
               max_tries: int = 20) -> Scene:
    """Draw one scene.

    Args:
        rng: The only source of randomness.
        img_size: ``(H, W)`` of the image.
        object_classes: Class ids to draw objects from (uniformly).
        num_objects: Inclusive ``(min, max)`` number of objects.
        stuff_classes: If given, the background is one or two of these
            classes (split at a random row) and is labelled in the semantic
            map; otherwise it is a plain gradient of no class.
        scale_range: Object diameter as a fraction of ``min(H, W)``.
        ignore_prob: Probability of a rectangle of pure noise labelled -1
            (the "other" region of segmentation datasets).
        noise_std: Standard deviation of the pixel noise added last.
        min_visible: Placements that would leave any instance with fewer
            visible pixels than this, or that touch an instance of the same
            class, are rejected and retried.
        max_tries: Placement attempts per object before giving up on it.

    Returns:
        Scene: image, semantic map, instance masks, labels and tight boxes.
    """
    h, w = (int(v) for v in img_size)
    if h < 16 or w < 16:
        raise ValueError(f'img_size must be at least 16x16, got {img_size}')
    if len(object_classes) == 0:
        raise ValueError('object_classes must not be empty')
    lo, hi = num_objects
    if not 0 <= lo <= hi:
        raise ValueError(f'bad num_objects {num_objects}')
    hw = (h, w)
    semantic = np.full(hw, NO_CLASS, dtype=np.int32)
    if stuff_classes:
        image = np.empty((h, w, 3), dtype=np.float32)
        top, bottom = rng.choice(stuff_classes, size=2)
        split = int(rng.integers(h // 4, h - h // 4))
        image[:split] = _texture(class_style(int(top)), hw, rng)[:split]
        image[split:] = _texture(class_style(int(bottom)), hw, rng)[split:]
        semantic[:split] = int(top)
        semantic[split:] = int(bottom)
    else:
        image = _background(hw, rng)
    if ignore_prob > 0 and rng.random() < ignore_prob:
        y0, x0 = int(rng.integers(0, h // 2)), int(rng.integers(0, w // 2))
        y1 = y0 + int(rng.integers(h // 8, h // 3))
        x1 = x0 + int(rng.integers(w // 8, w // 3))
        image[y0:y1, x0:x1] = rng.uniform(0, 255, (y1 - y0, x1 - x0, 3))
        semantic[y0:y1, x0:x1] = NO_CLASS

    visible = []
    labels = []
    for _ in range(int(rng.integers(lo, hi + 1))):
        cls = int(object_classes[int(rng.integers(len(object_classes)))])
        for _ in range(max_tries):
            mask = _place(rng, hw, cls, scale_range)
            if mask.sum() < min_visible:
                continue
            # Same-class instances must not touch: with the same look they
            # would merge into one blob that no annotation could split.
            grown = cv2.dilate(mask.astype(np.uint8), np.ones((3, 3)))
            if any((grown.astype(bool) & v).any()
                   for v, k in zip(visible, labels) if k == cls):
                continue
            left = [v & ~mask for v in visible]
            if all(v.sum() >= min_visible for v in left):
                break
        else:
            continue
        visible = left + [mask]
        labels.append(cls)
        image[mask] = _texture(class_style(cls), hw, rng)[mask]
        semantic[mask] = cls

    image += rng.normal(0.0, noise_std, size=image.shape)
    image = np.clip(np.round(image), 0, 255).astype(np.uint8)
    masks = (np.stack(visible) if visible else np.zeros((0, h, w), dtype=bool))
    boxes = (
        np.stack([tight_box(m) for m in visible]) if visible else np.zeros(
            (0, 4), dtype=np.float32))
    return Scene(image, semantic, masks, np.array(labels, dtype=np.int64),
                 boxes)
