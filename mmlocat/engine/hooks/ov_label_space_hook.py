"""Refuse training data whose labels index other classes than F-ViT's.

F-ViT's box head knows the whole vocabulary (e.g. the 65 OV-COCO classes);
a base-only training file may list only the 48 base classes, so its labels
0..47 index those. Without ``FViT(train_class_names=...)`` they would be
read as indices into the 65 classes: silent mislabelling. This hook compares
the training dataset's classes with the ones the detector expects before
the first iteration.
"""
from typing import List

from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper

from mmlocat.registry import HOOKS

__all__ = ['OVLabelSpaceHook']


def _innermost(dataset):
    """The dataset inside mmengine's wrappers (Repeat, ClassBalanced)."""
    while not hasattr(dataset, 'ann_file') and hasattr(dataset, 'dataset'):
        dataset = dataset.dataset
    return dataset


def label_names(dataset) -> List[str]:
    """The class names the dataset's labels index, label by label.

    For mmdet's COCO / LVIS datasets these are the annotation file's
    category names of ``cat_ids`` (LVIS labels follow the file's categories,
    whatever the dataset's ``METAINFO`` spells); otherwise the metainfo's
    ``classes``.
    """
    inner = _innermost(dataset)
    api = getattr(inner, 'lvis', None) or getattr(inner, 'coco', None)
    cat_ids = getattr(inner, 'cat_ids', None)
    if api is not None and cat_ids is not None and hasattr(api, 'cats'):
        return [api.cats[cid]['name'] for cid in cat_ids]
    return list(dataset.metainfo.get('classes', ()))


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
        found = label_names(dataset)
        if found == expected:
            return
        hint = ('set model.train_class_names to the training classes'
                if len(found) < len(expected) else
                'check model.train_class_names')
        raise ValueError(
            f'the training data '
            f'{getattr(_innermost(dataset), "ann_file", dataset)} labels '
            f'{len(found)} classes {found[:5]}..., but the detector expects '
            f'labels indexing {len(expected)} classes {expected[:5]}...; '
            f'{hint} (labels are mapped to the head by name)')
