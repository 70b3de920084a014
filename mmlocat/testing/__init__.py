"""Tiny deterministic datasets in the real on-disk formats, for tests.

Nothing here is imported by ``import mmlocat``; the detection writers need
pycocotools, which mmdet installs.
"""
from .generate import DATASET_KINDS, DEFAULT_SUBDIRS, generate
from .shapes import (SHAPES, TEXTURES, Scene, ShapeStyle, class_style,
                     draw_scene, tight_box)

__all__ = [
    'DATASET_KINDS', 'DEFAULT_SUBDIRS', 'generate', 'SHAPES', 'TEXTURES',
    'Scene', 'ShapeStyle', 'class_style', 'draw_scene', 'tight_box'
]
