from mmlocat.utils.hosts import is_installed
from .box_transforms import KeepOriginalBoxes, ResizeEdgeWithBoxes
from .caption_shards import WebDatasetCaptionDataset
from .caption_transforms import TokenizeCaption, build_open_clip_tokenizer
from .captions import BaseCaptionDataset, CocoCaptionDataset, TsvCaptionDataset
from .checked_dataset import CheckedDataset
from .coco20k import check_coco20k_list, make_coco20k, read_image_list
from .coco_object import (COCO_OBJECT_CLASSES, coco_object_map,
                          convert_coco_object)
from .dataset_check import DatasetReport, check_config_data, check_dataset
from .file_checks import DataFileError
from .imagenet_loc import (CocoBoxesDataset, ImageNetLocDataset,
                           keep_single_small, parse_loc_xml)
from .ov_coco import (OV_COCO_BASE_CLASSES, OV_COCO_CLASSES,
                      OV_COCO_NOVEL_CLASSES, make_ov_coco_files,
                      make_ov_coco_split)
from .ov_lvis import make_ov_lvis_base, make_ov_lvis_files
from .seg_map_check import CheckSegMap
from .size_check import CheckAnnotatedSize

__all__ = [
    'ImageNetLocDataset', 'CocoBoxesDataset', 'ResizeEdgeWithBoxes',
    'KeepOriginalBoxes', 'parse_loc_xml', 'keep_single_small',
    'OV_COCO_BASE_CLASSES', 'OV_COCO_NOVEL_CLASSES', 'OV_COCO_CLASSES',
    'make_ov_coco_split', 'make_ov_coco_files', 'make_ov_lvis_base',
    'make_ov_lvis_files', 'BaseCaptionDataset', 'CocoCaptionDataset',
    'TsvCaptionDataset', 'WebDatasetCaptionDataset', 'TokenizeCaption',
    'build_open_clip_tokenizer', 'COCO_OBJECT_CLASSES', 'coco_object_map',
    'convert_coco_object', 'make_coco20k', 'read_image_list',
    'CheckAnnotatedSize', 'check_coco20k_list', 'CheckedDataset',
    'CheckSegMap', 'DataFileError', 'DatasetReport', 'check_dataset',
    'check_config_data'
]

# The COCO-Object segmentation dataset needs mmseg.
if is_installed('mmseg'):
    from .coco_object import COCOObjectDataset  # noqa: F401
    __all__.append('COCOObjectDataset')
