"""A dataset wrapper that names every sample it cannot load.

Without it, a zero-byte image ends a run with OpenCV's
``(-215:Assertion failed) !buf.empty() in function 'imdecode_'``: no file
name, mid-run. :class:`CheckedDataset` wraps any dataset (mmengine's
``RepeatDataset`` pattern: build from a config, expose ``metainfo``,
``get_data_info``, ``full_init``) and, when loading a sample raises,
re-reads the sample's files to say which one is bad and how, in one line
``<Dataset> sample <index>: <path>: <what is wrong>``. It also inserts
:class:`mmlocat.CheckSegMap` after every ``LoadAnnotations`` of the wrapped
pipelines, so a label map of another size than its image is refused
before mmseg's resize hides it.

mmlocat's ``tools/train.py`` / ``tools/test.py`` wrap every dataloader's
dataset at run time (the dumped config stays as written). With the hosts'
own tools, wrap it in the config::

    custom_imports = dict(imports=['mmlocat'], allow_failed_imports=False)
    train_dataloader = dict(dataset=dict(
        _delete_=True, type='mmlocat.CheckedDataset', on_error='skip',
        dataset={{_base_.train_dataloader.dataset}}))
    custom_hooks = [dict(type='mmlocat.SkippedFilesHook')]

``on_error='skip'`` (training only) draws another sample instead, as
mmengine's datasets do for a pipeline that returns None; every skip is
logged at once by the data worker and written to a record that
:class:`mmlocat.SkippedFilesHook` counts and names at the end of each
epoch. Errors that are no file fault (a bug in a transform) are re-raised
unchanged, with a note naming the sample, and never skipped.

Before a sample loads, its files are stat-ed: one that is missing or no
regular file (a directory, a FIFO that would block the loader forever)
is that sample's fault without being opened. A JPEG that libjpeg decodes
with ``Corrupt JPEG data: N extraneous bytes`` (its warning names no
file) is logged once per file with its path (the image's bytes are read
once more for it).
"""
import json
import logging
import os
import tempfile
import weakref
from typing import Any, List, Optional, Union

import numpy as np
from mmengine.logging import print_log
from torch.utils.data import Dataset

from mmlocat.registry import DATASETS
from .file_checks import (DataFileError, Fault, first_file_fault,
                          jpeg_corruption, read_sample_file, sample_file_fault)
from .seg_map_check import SIZE_POLICIES, CheckSegMap

__all__ = [
    'CheckedDataset', 'SkipRecord', 'ON_ERROR', 'dataset_leaves',
    'checked_dataset_cfg', 'find_checked'
]

ON_ERROR = ('raise', 'skip')
JPEG_SUFFIXES = ('.jpg', '.jpeg', '.jpe')


def dataset_leaves(dataset) -> list:
    """The datasets inside mmengine / mmdet wrappers (``ConcatDataset``'s
    ``datasets``, ``RepeatDataset``'s ``dataset``, ...), in order."""
    if hasattr(dataset, 'datasets'):
        return [leaf for d in dataset.datasets for leaf in dataset_leaves(d)]
    if hasattr(dataset, 'dataset'):
        return dataset_leaves(dataset.dataset)
    return [dataset]


def find_checked(dataset) -> List['CheckedDataset']:
    """The :class:`CheckedDataset` wrappers in ``dataset``'s tree."""
    found = [dataset] if isinstance(dataset, CheckedDataset) else []
    for child in getattr(dataset, 'datasets', None) or []:
        found += find_checked(child)
    if hasattr(dataset, 'dataset'):
        found += find_checked(dataset.dataset)
    return found


def _type_name(step) -> str:
    kind = step.get('type', '') if isinstance(step, dict) else type(step)
    name = kind if isinstance(kind, str) else getattr(kind, '__name__', '')
    return name.split('.')[-1]


def seg_map_check_for(leaf, size_mismatch: str) -> CheckSegMap:
    """The :class:`CheckSegMap` for a dataset: label values are checked
    against its classes when it is an mmseg dataset (it has an
    ``ignore_index``)."""
    ignore = getattr(leaf, 'ignore_index', None)
    classes = (getattr(leaf, 'metainfo', None) or {}).get('classes')
    if ignore is None or not classes:
        return CheckSegMap(size_mismatch)
    return CheckSegMap(size_mismatch, len(classes), int(ignore))


def insert_seg_map_checks(leaf, size_mismatch: str) -> int:
    """Insert a :class:`CheckSegMap` after each ``LoadAnnotations`` of the
    leaf's pipeline unless it has one; returns how many were inserted."""
    transforms = getattr(getattr(leaf, 'pipeline', None), 'transforms', None)
    if not isinstance(transforms, list) or any(
            isinstance(t, CheckSegMap) for t in transforms):
        return 0
    steps: list = []
    for step in transforms:
        steps.append(step)
        if _type_name(step) == 'LoadAnnotations':
            steps.append(seg_map_check_for(leaf, size_mismatch))
    inserted = len(steps) - len(transforms)
    transforms[:] = steps
    return inserted


def _remove(path: str, owner: int) -> None:
    # forked data workers inherit the finalizer: only the creator removes
    if os.getpid() == owner and os.path.exists(path):
        os.remove(path)


class SkipRecord:
    """The skipped samples, as JSON lines in a temporary file.

    Data workers are separate processes: each appends its skips to the
    file (one short ``write`` in append mode each), the main process reads
    them. The file is removed when the record is garbage-collected in the
    process that created it.
    """

    def __init__(self) -> None:
        fd, self.path = tempfile.mkstemp(
            prefix='mmlocat_skipped_', suffix='.jsonl')
        os.close(fd)
        weakref.finalize(self, _remove, self.path, os.getpid())

    def add(self, entry: dict) -> None:
        """Append one skipped sample."""
        with open(self.path, 'a', encoding='utf-8') as f:
            f.write(json.dumps(entry) + '\n')

    def read(self) -> List[dict]:
        """Every skipped sample so far, in the order they were written."""
        if not os.path.exists(self.path):
            return []
        with open(self.path, encoding='utf-8') as f:
            return [json.loads(line) for line in f if line.strip()]


def _add_note(err: BaseException, note: str) -> None:
    if hasattr(err, 'add_note'):  # Python >= 3.11
        err.add_note(note)


@DATASETS.register_module()
class CheckedDataset(Dataset):
    """Name (path, dataset, index) every sample that fails to load.

    Args:
        dataset: The dataset or its config.
        on_error: ``'raise'`` (default): raise
            :class:`~mmlocat.datasets.file_checks.DataFileError` naming the
            bad file. ``'skip'``: load another sample instead, for training
            data (skipping in evaluation would change the metric: refused
            for a dataset in ``test_mode``; mmlocat's tools skip in the
            training dataloader only); every skip is logged and counted
            (:class:`SkipRecord`).
        seg_map_size: ``size_mismatch`` of the :class:`mmlocat.CheckSegMap`
            inserted after each ``LoadAnnotations`` (``'error'`` or the
            opt-in ``'resize'``); pipelines that already hold a
            ``CheckSegMap`` keep theirs.
        max_refetch: In skip mode, how many consecutive bad samples end
            the run (mmengine's ``BaseDataset`` default).
        lazy_init: Defer the wrapped dataset's ``full_init``.
    """

    def __init__(self,
                 dataset: Union[dict, Any],
                 on_error: str = 'raise',
                 seg_map_size: str = 'error',
                 max_refetch: int = 1000,
                 lazy_init: bool = False) -> None:
        if on_error not in ON_ERROR:
            raise ValueError(
                f'on_error must be one of {ON_ERROR}, got {on_error!r}')
        if seg_map_size not in SIZE_POLICIES:
            raise ValueError(f'seg_map_size must be one of {SIZE_POLICIES}, '
                             f'got {seg_map_size!r}')
        self.dataset = (
            DATASETS.build(dataset) if isinstance(dataset, dict) else dataset)
        self.name = type(self.dataset).__name__
        leaves = dataset_leaves(self.dataset)
        if on_error == 'skip' and any(
                getattr(leaf, 'test_mode', False) for leaf in leaves):
            raise ValueError(
                f"on_error='skip' is for training data: {self.name} is in "
                'test mode, where skipping samples would change the metric; '
                "use on_error='raise'")
        self.on_error = on_error
        self.seg_map_size = seg_map_size
        self.max_refetch = max_refetch
        self.record = SkipRecord() if on_error == 'skip' else None
        for leaf in leaves:
            insert_seg_map_checks(leaf, seg_map_size)
        self._fully_initialized = False
        self._warned_jpegs: set = set()
        if not lazy_init:
            self.full_init()

    @property
    def metainfo(self) -> dict:
        """The wrapped dataset's ``metainfo``."""
        return self.dataset.metainfo

    def full_init(self) -> None:
        """Fully initialise the wrapped dataset."""
        if self._fully_initialized:
            return
        if hasattr(self.dataset, 'full_init'):
            self.dataset.full_init()
        self._fully_initialized = True

    def get_data_info(self, idx: int) -> dict:
        """The wrapped dataset's ``get_data_info``."""
        return self.dataset.get_data_info(idx)

    def get_cat_ids(self, idx: int) -> List[int]:
        """The wrapped dataset's ``get_cat_ids`` (mmdet's samplers)."""
        return self.dataset.get_cat_ids(idx)

    def __len__(self) -> int:
        return len(self.dataset)

    def describe(self, idx: int) -> str:
        """``'<Dataset> sample <idx>'``, and its image when known."""
        where = f'{self.name} sample {idx}'
        try:
            path = self.dataset.get_data_info(idx).get('img_path')
        except Exception:  # the message must not fail in turn
            path = None
        return f'{where} ({path})' if path else where

    def diagnose(self, idx: int, err: Exception) -> Optional[Fault]:
        """The file fault behind ``err`` for sample ``idx``, or None when
        its files are fine (the error is not the data's)."""
        if isinstance(err, DataFileError):
            return err.fault or Fault('load_error', self.describe(idx),
                                      str(err))
        try:
            info = self.dataset.get_data_info(idx)
        except Exception:
            return None
        return first_file_fault(info)

    def precheck(self, idx: int) -> None:
        """Before loading sample ``idx``: raise
        :class:`~mmlocat.datasets.file_checks.DataFileError` if one of its
        files is missing or no regular file (stat only: a FIFO would block
        the loader), and log a JPEG that libjpeg decodes with a corrupt-data
        warning, naming it."""
        try:
            info = self.dataset.get_data_info(idx)
        except Exception:  # loading will say what is wrong
            return
        fault = sample_file_fault(info)
        if fault is not None:
            raise DataFileError(str(fault), fault)
        path = info.get('img_path')
        if (not isinstance(path, str) or path in self._warned_jpegs
                or not path.lower().endswith(JPEG_SUFFIXES)):
            return
        try:
            found = jpeg_corruption(read_sample_file(info, 'img_path'))
        except OSError:  # loading will say what is wrong
            return
        if found:
            self._warned_jpegs.add(path)
            print_log(
                f'{self.name} sample {idx}: {path}: libjpeg decodes it with '
                f'"{found[0]}" (its warning names no file; the pixels may '
                'be damaged): re-encode or replace the file',
                logger='current',
                level=logging.WARNING)

    def __getitem__(self, idx: int):
        first = idx
        for _ in range(self.max_refetch + 1):
            try:
                self.precheck(idx)
                return self.dataset[idx]
            except Exception as err:
                fault = self.diagnose(idx, err)
                if fault is None:
                    _add_note(err, f'while loading {self.describe(idx)}')
                    raise
                what = err if isinstance(err, DataFileError) else fault
                message = f'{self.name} sample {idx}: {what}'
                if self.on_error == 'raise':
                    raise DataFileError(
                        message + " (CheckedDataset(on_error='skip') or "
                        'tools/train.py --on-data-error skip skips such '
                        'samples in training)') from None  # the bad file says
                    # more than the decoder's own error
                self.skip(idx, fault, message)
                idx = int(np.random.randint(0, len(self)))
        raise DataFileError(
            f'{self.name}: {self.max_refetch + 1} bad samples in a row from '
            f'sample {first} on (on_error=\'skip\'); see the skipped files '
            'in the log')

    def skip(self, idx: int, fault: Fault, message: str) -> None:
        """Log and record one skipped sample."""
        self.record.add(
            dict(
                dataset=self.name,
                index=idx,
                kind=fault.kind,
                path=fault.path,
                detail=fault.detail))
        print_log(
            f'skipped {message}', logger='current', level=logging.WARNING)

    def skipped(self) -> List[dict]:
        """Every sample skipped so far (all data workers)."""
        return self.record.read() if self.record is not None else []

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(dataset={self.name}, '
                f'on_error={self.on_error!r}, '
                f'seg_map_size={self.seg_map_size!r})')


def checked_dataset_cfg(dataset: dict, **kwargs) -> dict:
    """``dataset`` wrapped in a :class:`CheckedDataset` config with
    ``kwargs``; a config that already is one is returned as it is."""
    if _type_name(dataset) == 'CheckedDataset':
        return dataset
    return dict(type='mmlocat.CheckedDataset', dataset=dataset, **kwargs)
