"""Refuse training data whose labels index other classes than F-ViT's.

F-ViT's box head knows the whole vocabulary (e.g. the 65 OV-COCO classes);
a base-only training file may list only the 48 base classes, so its labels
0..47 index those. Without ``FViT(train_class_names=...)`` they would be
read as indices into the 65 classes: silent mislabelling. This hook compares
the training dataset's classes with the ones the detector expects before
the first iteration.
"""
from typing import List, Optional

from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper

from mmlocat.registry import HOOKS

__all__ = ['OVLabelSpaceHook']


def _innermost(dataset):
    """The dataset inside mmengine's wrappers (Repeat, ClassBalanced)."""
    while not hasattr(dataset, 'ann_file') and hasattr(dataset, 'dataset'):
        dataset = dataset.dataset
    return dataset


def _is_lvis(dataset) -> bool:
    try:
        from mmdet.datasets import LVISDataset
    except ImportError:  # no mmdet, no LVIS dataset
        return False
    return isinstance(dataset, LVISDataset)


def label_names(dataset) -> Optional[List[str]]:
    """The class names the dataset's labels index, label by label.

    mmdet's COCO-style datasets select their categories by the metainfo's
    ``classes``, so those names are the labels'. mmdet's LVIS datasets label
    every category of the annotation file in id order, whatever their
    ``METAINFO`` spells (mmdet's list writes ``speaker_(stereo_equipment)``
    where the file has ``speaker_(stero_equipment)``), and drop the file's
    API after loading: for them this returns None and the caller compares
    the number of categories.
    """
    inner = _innermost(dataset)
    if _is_lvis(inner):
        return None
    return list(dataset.metainfo.get('classes', ()))


def _first_difference(found: List[str], expected: List[str]) -> str:
    for i, (a, b) in enumerate(zip(found, expected)):
        if a != b:
            return f' (first difference at label {i}: {a!r} vs {b!r})'
    return ''


@HOOKS.register_module()
class OVLabelSpaceHook(Hook):
    """Check that training labels index the classes the detector expects.

    The detector must expose ``train_label_names`` (:class:`mmlocat.FViT`:
    its ``train_class_names`` or, without them, the box head's classes).

    Raises:
        ValueError: Before training, naming the annotation file, the
            expected and the found class lists.
    """
    priority = 'VERY_HIGH'

    def before_train(self, runner) -> None:
        model = runner.model.module if is_model_wrapper(
            runner.model) else runner.model
        expected: List[str] = list(getattr(model, 'train_label_names', ()))
        if not expected:
            return
        dataset = runner.train_dataloader.dataset
        ann_file = getattr(_innermost(dataset), 'ann_file', dataset)
        found = label_names(dataset)
        if found is None:  # LVIS: labels index all the file's categories
            num = len(_innermost(dataset).cat_ids)
            if num != len(expected):
                raise ValueError(
                    f'the training data {ann_file} labels its {num} '
                    'categories (LVIS: every category of the file, in id '
                    f'order), but the detector expects labels indexing '
                    f'{len(expected)} classes; keep all categories in the '
                    'base-only file (tools/dataset_converters/make_ov_lvis.py)'
                    ' or set model.train_class_names')
            return
        if found == expected:
            return
        hint = ('set model.train_class_names to the training classes'
                if len(found) < len(expected) else
                'check model.train_class_names')
        raise ValueError(
            f'the training data {ann_file} labels {len(found)} classes '
            f'{found[:5]}..., but the detector expects labels indexing '
            f'{len(expected)} classes {expected[:5]}...'
            f'{_first_difference(found, expected)}; {hint} (labels are '
            'mapped to the head by name)')
