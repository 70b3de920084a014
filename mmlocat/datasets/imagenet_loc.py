"""Image folders with localisation boxes for PiB and CorLoc.

PiB in "Vision Transformers Need More Than Registers" (Shi et al., CVPR
2026, https://arxiv.org/abs/2602.22394) is measured on ImageNet-val with the
ILSVRC LOC boxes, keeping the images with exactly one box smaller than 25%
of the image; object discovery (CorLoc) uses VOC07 / VOC12 / COCO boxes.
:class:`ImageNetLocDataset` reads Pascal-VOC style XML (the ILSVRC LOC and
VOC layouts) next to an mmpretrain image folder; :class:`CocoBoxesDataset`
reads COCO-format boxes. Both put ``gt_bboxes`` (``(n, 4)`` float32,
``x1, y1, x2, y2`` pixel edges of the original image) and, where the
annotation states it, ``ann_img_shape`` (its ``(height, width)``, for
:class:`~mmlocat.datasets.CheckAnnotatedSize`) into each data info.

For CorLoc nothing is dropped silently: an image without any box is an
error by default (``without_boxes``; LOST's evaluation cannot score one
either), and ``expected_num_images`` refuses a set of another size than
the protocol's (VOC07 / VOC12 trainval 5011 / 11540, COCO20k 19817). Nor
is anything scored twice or against the wrong image: an image listed
twice in a split file (or a COCO file) and a box reaching outside the
size its annotation states (:func:`~mmlocat.datasets.size_check.
boxes_outside`) are errors naming the file, the line or image id and the
box.
"""
import logging
import os.path as osp
import xml.etree.ElementTree as ET
from typing import List, Optional, Tuple

import numpy as np
from mmengine.fileio import list_from_file, load
from mmengine.logging import print_log
from mmpretrain.datasets import BaseDataset, CustomDataset

from mmlocat.registry import DATASETS
from .size_check import boxes_outside

__all__ = [
    'parse_loc_xml', 'keep_single_small', 'ImageNetLocDataset',
    'CocoBoxesDataset', 'WITHOUT_BOXES'
]

#: What the box datasets do with an image without any box.
WITHOUT_BOXES = ('error', 'skip', 'keep')


def parse_loc_xml(path: str,
                  one_based: bool = True,
                  skip_difficult: bool = False
                  ) -> Tuple[np.ndarray, Optional[Tuple[int, int]]]:
    """Read the boxes of one Pascal-VOC / ILSVRC LOC annotation file.

    Args:
        path: XML file ``<annotation><size><width/><height/></size>
            <object><bndbox><xmin/><ymin/><xmax/><ymax/></bndbox>...``.
        one_based: The values are 1-based inclusive pixel indices (VOC): the
            box of pixels ``xmin..xmax`` spans edges ``[xmin - 1, xmax]``, as
            in LOST's CorLoc code. False keeps the values as they are.
        skip_difficult: Drop objects marked ``<difficult>1</difficult>``.

    Returns:
        ``(boxes (n, 4) float32, (height, width) or None)``.

    Raises:
        ValueError: On a malformed file or box.
    """
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        raise ValueError(f'cannot parse box annotation {path}: {e}') from e
    size = None
    size_node = root.find('size')
    if size_node is not None:
        try:
            size = (int(float(size_node.findtext('height'))),
                    int(float(size_node.findtext('width'))))
        except (TypeError, ValueError):
            size = None
    boxes = []
    for obj in root.iter('object'):
        if skip_difficult and obj.findtext('difficult', '0').strip() == '1':
            continue
        bnd = obj.find('bndbox')
        try:
            box = [
                float(bnd.findtext(k))
                for k in ('xmin', 'ymin', 'xmax', 'ymax')
            ]
        except (AttributeError, TypeError, ValueError) as e:
            raise ValueError(f'object without a valid <bndbox> in {path}') \
                from e
        if one_based:
            box[0] -= 1
            box[1] -= 1
        if box[2] < box[0] or box[3] < box[1]:
            raise ValueError(f'box {box} in {path} has x2 < x1 or y2 < y1')
        boxes.append(box)
    return np.array(boxes, dtype=np.float32).reshape(-1, 4), size


def keep_single_small(boxes: np.ndarray,
                      img_hw: Tuple[int, int],
                      max_area_ratio: float = 0.25) -> bool:
    """PiB filter: exactly one box, with area < ``max_area_ratio`` image."""
    if len(boxes) != 1:
        return False
    x1, y1, x2, y2 = boxes[0]
    return (x2 - x1) * (y2 - y1) < max_area_ratio * img_hw[0] * img_hw[1]


def _image_hw(path: str) -> Tuple[int, int]:
    """Image size from the file header (no full decode)."""
    from PIL import Image
    with Image.open(path) as img:
        return img.height, img.width


def _check_args(max_area_ratio: float, without_boxes: str,
                expected_num_images: Optional[int]) -> None:
    if not 0 < max_area_ratio <= 1:
        raise ValueError(
            f'max_area_ratio must be in (0, 1], got {max_area_ratio}')
    if without_boxes not in WITHOUT_BOXES:
        raise ValueError(f'without_boxes must be one of {WITHOUT_BOXES}, '
                         f'got {without_boxes!r}')
    if expected_num_images is not None and (int(expected_num_images)
                                            != expected_num_images
                                            or expected_num_images <= 0):
        raise ValueError('expected_num_images must be a positive int or '
                         f'None, got {expected_num_images!r}')


def _without_boxes(infos: List[dict], policy: str, source: str) -> List[dict]:
    """Apply the ``without_boxes`` policy, naming and counting them."""
    empty = [info['img_path'] for info in infos if not len(info['gt_bboxes'])]
    if not empty:
        return infos
    msg = (f'{source}: {len(empty)} of {len(infos)} images have no box, '
           f'e.g. {empty[:10]}')
    if policy == 'error':
        raise ValueError(
            msg + "; set without_boxes='skip' to drop them or 'keep' to "
            'score them (a CorLoc miss each)')
    print_log(
        msg + (f'; dropped (without_boxes={policy!r})' if policy == 'skip' else
               f'; kept, each a CorLoc miss (without_boxes={policy!r})'),
        logger='current',
        level=logging.WARNING)
    if policy == 'skip':
        return [info for info in infos if len(info['gt_bboxes'])]
    return infos


def refuse_duplicate_lines(path: str) -> None:
    """Refuse a split / list file that names an image twice (its first
    field, e.g. a VOC id or an ``ann_file``'s path): each would be scored
    twice."""
    seen = {}
    for lineno, line in enumerate(list_from_file(path), 1):
        fields = line.split()
        if not fields:
            continue
        if fields[0] in seen:
            raise ValueError(
                f'{path}:{lineno}: image {fields[0]!r} is listed again '
                f'(first at line {seen[fields[0]]}); it would be scored '
                'twice: remove the repeated line')
        seen[fields[0]] = lineno


def _refuse_outside(boxes: np.ndarray, hw: Optional[Tuple[int, int]],
                    where: str) -> None:
    if hw is None or not len(boxes):
        return
    outside = boxes_outside(boxes, hw, where)
    if outside is not None:
        raise ValueError(outside)


def _check_count(infos: List[dict], expected: Optional[int],
                 source: str) -> None:
    """Refuse a set of another size than the protocol's."""
    if expected is not None and len(infos) != expected:
        raise ValueError(
            f'{source}: {len(infos)} images, expected {expected} '
            "(expected_num_images, the protocol's count); a partial or "
            'other set is not comparable with the published CorLoc. Set '
            'expected_num_images=None to evaluate it anyway')


@DATASETS.register_module()
class ImageNetLocDataset(CustomDataset):
    """mmpretrain image folder plus Pascal-VOC / ILSVRC LOC XML boxes.

    Images and labels are found as by mmpretrain's ``CustomDataset``
    (class sub-folders, or an ``ann_file`` of ``path label`` lines, or of
    bare names with ``with_label=False``). The XML of image ``a/b/x.JPEG``
    is ``<box_prefix>/a/b/x.xml`` or ``<box_prefix>/x.xml`` (the ILSVRC
    ``val/*.xml`` layout). The VOC07 layout also works:
    ``data_prefix='JPEGImages', box_prefix='Annotations',
    ann_file='ImageSets/Main/trainval.txt', with_label=False,
    img_suffix='.jpg'``.

    Args:
        box_prefix: Folder of the XML files (relative to ``data_root``).
        filter_single_small: Keep only images with exactly one box whose
            area is < ``max_area_ratio`` of the image (the PiB protocol).
        max_area_ratio: Area bound of the filter.
        one_based: XML values are 1-based inclusive pixel indices (VOC,
            ILSVRC); see :func:`parse_loc_xml`.
        skip_difficult: Ignore ``difficult`` objects.
        img_suffix: Appended to ``ann_file`` entries without an extension.
        missing_boxes: ``'error'`` (default) or ``'skip'`` images without
            an XML file.
        without_boxes: An image whose XML has no object (and that the PiB
            filter does not drop): ``'error'`` (default), ``'skip'`` or
            ``'keep'`` (a CorLoc miss); the last two warn with their count
            and names.
        expected_num_images: Refuse the set unless it has this many images
            after the filters (VOC07 trainval: 5011, VOC12: 11540); None
            skips the check.
        **kwargs: Arguments of ``CustomDataset`` (``data_root``,
            ``data_prefix``, ``ann_file``, ``with_label``, ``pipeline``, ...).
    """

    def __init__(self,
                 box_prefix: str = 'val_boxes',
                 filter_single_small: bool = True,
                 max_area_ratio: float = 0.25,
                 one_based: bool = True,
                 skip_difficult: bool = False,
                 img_suffix: Optional[str] = None,
                 missing_boxes: str = 'error',
                 without_boxes: str = 'error',
                 expected_num_images: Optional[int] = None,
                 **kwargs) -> None:
        _check_args(max_area_ratio, without_boxes, expected_num_images)
        if missing_boxes not in ('error', 'skip'):
            raise ValueError("missing_boxes must be 'error' or 'skip', got "
                             f'{missing_boxes!r}')
        self.box_prefix = box_prefix
        self.filter_single_small = filter_single_small
        self.max_area_ratio = max_area_ratio
        self.one_based = one_based
        self.skip_difficult = skip_difficult
        self.img_suffix = img_suffix
        self.missing_boxes = missing_boxes
        self.without_boxes = without_boxes
        self.expected_num_images = expected_num_images
        super().__init__(**kwargs)

    def _box_dir(self) -> str:
        if osp.isabs(self.box_prefix) or not self.data_root:
            return self.box_prefix
        return osp.join(self.data_root, self.box_prefix)

    def _find_xml(self, img_path: str) -> Optional[str]:
        rel = osp.relpath(img_path, self.img_prefix)
        box_dir = self._box_dir()
        for cand in (osp.splitext(rel)[0],
                     osp.splitext(osp.basename(img_path))[0]):
            path = osp.join(box_dir, cand + '.xml')
            if osp.isfile(path):
                return path
        return None

    def load_data_list(self) -> List[dict]:
        """Image infos with ``gt_bboxes``, after the optional PiB filter."""
        if self.ann_file:
            refuse_duplicate_lines(self.ann_file)
        if self.img_suffix and self.ann_file and not self.with_label:
            lines = [ln.strip() for ln in list_from_file(self.ann_file)]
            lines = [ln for ln in lines if ln]
            data_list = [
                dict(
                    img_path=osp.join(
                        self.img_prefix,
                        name if osp.splitext(name)[1] else name +
                        self.img_suffix)) for name in lines
            ]
        else:
            data_list = super().load_data_list()
        if not osp.isdir(self._box_dir()):
            raise FileNotFoundError(f'box folder not found: {self._box_dir()}')
        kept = []
        for info in data_list:
            xml = self._find_xml(info['img_path'])
            if xml is None:
                if self.missing_boxes == 'skip':
                    continue
                raise FileNotFoundError(
                    f"no box XML for {info['img_path']} in {self._box_dir()}"
                    " (set missing_boxes='skip' to ignore such images)")
            boxes, size = parse_loc_xml(xml, self.one_based,
                                        self.skip_difficult)
            image_id = osp.splitext(osp.basename(info['img_path']))[0]
            _refuse_outside(boxes, size, f'{xml} (image id {image_id!r})')
            if self.filter_single_small:
                hw = size or _image_hw(info['img_path'])
                if not keep_single_small(boxes, hw, self.max_area_ratio):
                    continue
            info['gt_bboxes'] = boxes
            if size is not None:
                info['ann_img_shape'] = size
            kept.append(info)
        source = self.ann_file or self.img_prefix
        kept = _without_boxes(kept, self.without_boxes, source)
        if not kept:
            raise RuntimeError(
                f'no image left in {self.img_prefix} after the box filter '
                f'(filter_single_small={self.filter_single_small}, '
                f'max_area_ratio={self.max_area_ratio})')
        _check_count(kept, self.expected_num_images, source)
        return kept


@DATASETS.register_module()
class CocoBoxesDataset(BaseDataset):
    """Images with COCO-format boxes, for PiB / CorLoc on COCO or VOC.

    ``ann_file`` is a COCO ``instances`` JSON (also what mmdet's
    ``pascal_voc.py`` converter writes for VOC); ``bbox`` ``[x, y, w, h]``
    becomes ``x1, y1, x2, y2``; crowd boxes are ignored (LOST's COCO20k
    evaluation drops them too). Labels are not used (``gt_label`` is not
    set).

    Args:
        ann_file: COCO JSON (relative to ``data_root``).
        data_prefix: Image folder, e.g. ``dict(img_path='val2017')``.
        filter_single_small: Keep only images with exactly one box whose
            area is < ``max_area_ratio`` of the image.
        max_area_ratio: Area bound of the filter.
        round_boxes: Round ``x``, ``y``, ``x + w``, ``y + h`` to integers
            (half to even, Python's ``round``), as LOST's COCO20k
            evaluation (``extract_gt_COCO``); False keeps the floats.
        without_boxes: An image without any non-crowd box (that the PiB
            filter does not drop): ``'error'`` (default), ``'skip'`` or
            ``'keep'`` (a CorLoc miss); the last two warn with their count
            and names.
        expected_num_images: Refuse the set unless it has this many images
            after the filters (COCO20k: 19817); None skips the check.
        **kwargs: Other ``BaseDataset`` arguments (``data_root``,
            ``pipeline``, ``test_mode``, ...).
    """

    def __init__(self,
                 ann_file: str,
                 filter_single_small: bool = False,
                 max_area_ratio: float = 0.25,
                 round_boxes: bool = False,
                 without_boxes: str = 'error',
                 expected_num_images: Optional[int] = None,
                 **kwargs) -> None:
        _check_args(max_area_ratio, without_boxes, expected_num_images)
        self.filter_single_small = filter_single_small
        self.max_area_ratio = max_area_ratio
        self.round_boxes = round_boxes
        self.without_boxes = without_boxes
        self.expected_num_images = expected_num_images
        super().__init__(ann_file=ann_file, **kwargs)

    def load_data_list(self) -> List[dict]:
        """Image infos with ``gt_bboxes`` from the COCO JSON."""
        coco = load(self.ann_file)
        if not isinstance(coco, dict) or not isinstance(
                coco.get('images'), list) or not isinstance(
                    coco.get('annotations'), list):
            raise ValueError(f'{self.ann_file} is not a COCO JSON with '
                             '"images" and "annotations" lists')
        boxes = {}
        for img in coco['images']:
            if img['id'] in boxes:
                raise ValueError(
                    f'{self.ann_file}: image id {img["id"]} is listed twice '
                    "in 'images'; it would be scored twice: remove one")
            boxes[img['id']] = []
        for ann in coco['annotations']:
            if ann.get('iscrowd', 0):
                continue
            if ann['image_id'] not in boxes:
                raise ValueError(f'annotation {ann.get("id")} refers to '
                                 f'unknown image {ann["image_id"]}')
            x, y, w, h = (float(v) for v in ann['bbox'])
            if w < 0 or h < 0:
                raise ValueError(f'annotation {ann.get("id")} has a negative'
                                 f' box size {ann["bbox"]}')
            box = [x, y, x + w, y + h]  # float64 sums, as LOST's
            if self.round_boxes:
                box = [float(round(v)) for v in box]
            boxes[ann['image_id']].append(box)
        data_list = []
        for img in coco['images']:
            img_boxes = np.array(boxes[img['id']], np.float32).reshape(-1, 4)
            hw = (int(img['height']), int(img['width']))
            _refuse_outside(
                img_boxes, hw, f'{self.ann_file} (image id {img["id"]}, '
                f'{img["file_name"]})')
            if self.filter_single_small and not keep_single_small(
                    img_boxes, hw, self.max_area_ratio):
                continue
            data_list.append(
                dict(
                    img_path=osp.join(self.img_prefix, img['file_name']),
                    img_id=img['id'],
                    gt_bboxes=img_boxes,
                    ann_img_shape=hw))
        data_list = _without_boxes(data_list, self.without_boxes,
                                   self.ann_file)
        if not data_list:
            raise RuntimeError(f'no image left in {self.ann_file} after the '
                               'box filters')
        _check_count(data_list, self.expected_num_images, self.ann_file)
        return data_list
