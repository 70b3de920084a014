"""Read every file of a dataset before a long run and report what is wrong.

:func:`check_dataset` goes through every sample of a built dataset (the
datasets inside mmengine's ``ConcatDataset`` / ``RepeatDataset`` /
``ClassBalancedDataset`` each once) and reads its files through the
dataset's own loading transforms: the steps of its pipeline whose type
starts with ``Load`` (``LoadImageFromFile``, mmseg / mmdet
``LoadAnnotations``, ...), in pipeline order, without the augmentations
between them. It reports

* ``missing``, ``not_regular`` (a directory, a FIFO: stat-ed, never
  opened), ``empty``, ``undecodable`` and ``truncated`` files
  (:mod:`mmlocat.datasets.file_checks`); for a segmentation dataset that
  lists its image folder (mmseg's, without ``ann_file``), every label map
  whose image the listing leaves out (missing or no regular file),
* ``size_mismatch``: a decoded image whose size is not its annotation's
  (the data info's ``height`` / ``width`` or ``ann_img_shape``: VOC
  ``<size>``, COCO ``images[].width/height``) or a label map of another
  size than its image,
* ``label_channels``: a label map of several channels (a grey map saved
  as RGB),
* ``label_out_of_range``: label-map values outside the dataset's classes
  other than its ignore index (after ``reduce_zero_label``, as the loss
  sees them), classification labels or box labels outside the classes,
* ``box_outside``: boxes (mmdet ``instances``, ``gt_bboxes``) reaching
  outside the image,
* ``exif_rotated``: images with an EXIF orientation other than 1,
* ``load_error``: a loading step that failed on files that look fine,

and, as notes that are no fault, label maps a pipeline's
``CheckSegMap(size_mismatch='resize')`` resizes, captions longer than
the context of the pipeline's ``TokenizeCaption`` (truncated as open_clip
truncates) and, as a warning, JPEGs that libjpeg decodes with ``Corrupt
JPEG data: N extraneous bytes`` (``corrupt_jpeg``).
``tools/misc/check_dataset.py`` is its command line, ``tools/train.py
--check-data`` (or ``check_data = True`` in the config) runs it on the
training and validation data before training.
"""
import json
import os.path as osp
import sys
from collections import Counter
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
from mmengine import fileio
from mmengine.registry import init_default_scope
from mmengine.utils import ProgressBar
from torch.utils.data import DataLoader, Dataset

from mmlocat.registry import DATASETS
from .checked_dataset import dataset_leaves
from .file_checks import (FAULT_KINDS, Fault, bytes_fault, exif_orientation,
                          hw_text, jpeg_corruption, read_or_fault,
                          regular_file_fault, sample_files)
from .seg_map_check import CheckSegMap, seg_map_faults
from .size_check import boxes_outside

__all__ = [
    'DatasetReport', 'check_dataset', 'build_split_dataset',
    'check_config_data', 'check_before_run', 'reports_json', 'NOTE_KINDS',
    'SPLITS'
]

SPLITS = ('train', 'val', 'test')
NOTE_KINDS = ('label_resized', 'caption_truncated', 'corrupt_jpeg')
# notes reported as warnings
WARNING_KINDS = ('corrupt_jpeg', )
# EXIF orientations OpenCV applies while decoding with these flags
_ORIENTING = ('color', 'grayscale')


def _name(step) -> str:
    return type(step).__name__


class _LeafChecks:
    """How one dataset of the tree is checked: its loading steps, its
    seg-map policy, its classes and its caption tokenizer."""

    def __init__(self, leaf) -> None:
        steps = list(
            getattr(getattr(leaf, 'pipeline', None), 'transforms', None) or [])
        self.leaf = leaf
        self.loaders: List[Callable] = [
            s for s in steps if _name(s).startswith('Load')
        ]
        own = getattr(leaf, 'load_image', None)  # webdataset shards
        if callable(own):
            self.loaders.insert(0, own)
        checks = [s for s in steps if isinstance(s, CheckSegMap)]
        self.resize_labels = bool(checks) and checks[0].size_mismatch == \
            'resize'
        classes = (getattr(leaf, 'metainfo', None) or {}).get('classes')
        self.num_classes = len(classes) if classes else None
        self.ignore_index = int(getattr(leaf, 'ignore_index', 255))
        self.tokenizer = next(
            (s.tokenizer for s in steps if _name(s) == 'TokenizeCaption'),
            None)
        self.orients = any(
            str(getattr(s, 'color_type', 'color')) in _ORIENTING
            for s in self.loaders if _name(s) == 'LoadImageFromFile')

    def __len__(self) -> int:
        return len(self.leaf)

    def file_faults(self, info: Dict) -> Tuple[List[Fault], int]:
        """Faults of the sample's files (and EXIF), and how many files."""
        faults, files = [], 0
        for key, path in sample_files(info):
            files += 1
            data, fault = read_or_fault(info, key)
            fault = fault or bytes_fault(path, data)
            if fault is not None:
                faults.append(fault)
                continue
            faults += [
                Fault(
                    'corrupt_jpeg', path, f'libjpeg decodes it with "{text}"'
                    ' (the pixels may be damaged; training logs it): '
                    're-encode or replace the file')
                for text in jpeg_corruption(data)[:1]
            ]
            orientation = exif_orientation(data) if key == 'img_path' else 1
            if orientation != 1:
                applied = ('which the loader applies while decoding'
                           if self.orients else
                           "which the loader's color_type ignores")
                faults.append(
                    Fault(
                        'exif_rotated', path,
                        f'EXIF orientation {orientation}, {applied}: check '
                        'that its annotation follows the decoded image'))
        return faults, files

    def load(self, info: Dict) -> Tuple[Optional[Dict], Optional[Fault]]:
        """Run the loading steps; the results, or the fault that stopped
        them."""
        results = info
        for step in self.loaders:
            where = info.get('img_path') or info.get('seg_map_path') or '?'
            try:
                out = step(results)
            except Exception as err:  # any failure is the finding
                text = ' '.join(str(err).split()) or type(err).__name__
                return None, Fault(
                    'load_error', where, f'{_step_name(step)} failed: '
                    f'{type(err).__name__}: {text}')
            if out is None:
                return None, Fault('load_error', where,
                                   f'{_step_name(step)} returned no sample')
            results = out
        return results, None

    def loaded_faults(self, info: Dict, results: Dict) -> Tuple[List, List]:
        """Faults and notes of the loaded sample (sizes, labels,
        captions)."""
        faults: List[Fault] = []
        notes: List[Fault] = []
        img = info.get('img_path', '?')
        hw = results.get('ori_shape') or (results['img'].shape[:2]
                                          if 'img' in results else None)
        said = _annotated_hw(info)
        if hw is not None and said is not None:
            if tuple(hw[:2]) != said:
                faults.append(
                    Fault(
                        'size_mismatch', img, f'the annotation gives '
                        f'{hw_text(said)} (HxW), the decoded image is '
                        f'{hw_text(hw)}'))
        if results.get('gt_seg_map') is not None and hw is not None:
            for fault in seg_map_faults(
                    results, self.num_classes if hasattr(
                        self.leaf, 'ignore_index') else None,
                    self.ignore_index):
                resized = (
                    fault.kind == 'size_mismatch' and self.resize_labels)
                (notes if resized else faults).append(
                    fault._replace(kind='label_resized') if resized else fault)
        faults += self._label_faults(info, img)
        faults += self._box_faults(info, img, hw)
        notes += self._caption_notes(info, img)
        return faults, notes

    def _box_faults(self, info: Dict, img: str,
                    hw: Optional[Tuple[int, int]]) -> List[Fault]:
        """Boxes (mmdet ``instances[].bbox``, ``gt_bboxes``) reaching
        outside the image as decoded (else as annotated)."""
        hw = tuple(hw[:2]) if hw is not None else _annotated_hw(info)
        boxes = [i['bbox'] for i in info.get('instances', []) if 'bbox' in i]
        if info.get('gt_bboxes') is not None:
            boxes += list(np.asarray(info['gt_bboxes']).reshape(-1, 4))
        if hw is None or not boxes:
            return []
        image_id = info.get('img_id', osp.splitext(osp.basename(img))[0])
        outside = boxes_outside(
            np.array(boxes, np.float64), hw, f'image id {image_id!r}')
        return [] if outside is None else [Fault('box_outside', img, outside)]

    def _label_faults(self, info: Dict, img: str) -> List[Fault]:
        """Classification (``gt_label``) and box (``instances[].bbox_label``)
        labels outside the classes."""
        if not self.num_classes:
            return []
        labels = list(np.ravel(info.get('gt_label', [])))
        labels += [
            i['bbox_label'] for i in info.get('instances', [])
            if 'bbox_label' in i
        ]
        bad = sorted(
            {int(v)
             for v in labels if not 0 <= int(v) < self.num_classes})
        if not bad:
            return []
        return [
            Fault(
                'label_out_of_range', img,
                f'labels {bad[:10]} outside the {self.num_classes} classes '
                f'0..{self.num_classes - 1}')
        ]

    def _caption_notes(self, info: Dict, img: str) -> List[Fault]:
        if self.tokenizer is None:
            return []
        from .caption_transforms import over_length
        texts = info.get('captions') or ([info['caption']]
                                         if info.get('caption') else [])
        if not texts:
            return []
        length = self.tokenizer.context_length
        return [
            Fault(
                'caption_truncated', img, f'caption longer than {length} '
                f'tokens, truncated as open_clip does: {text[:60]!r}...')
            for text, long in zip(texts, over_length(self.tokenizer, texts))
            if long
        ]

    def check(self, index: int) -> Tuple[List[Fault], List[Fault], int]:
        """``(faults, notes, files checked)`` of sample ``index``."""
        info = self.leaf.get_data_info(index)
        found, files = self.file_faults(info)
        faults = [f for f in found if f.kind not in NOTE_KINDS]
        noted = [f for f in found if f.kind in NOTE_KINDS]
        if any(f.kind != 'exif_rotated' for f in faults):
            return faults, noted, files  # the loaders would only fail again
        results, fault = self.load(dict(info))
        if fault is not None:
            return faults + [fault], noted, files
        more, notes = self.loaded_faults(info, results)
        return faults + more, noted + notes, files

    def listing_faults(self) -> List[Fault]:
        """Label maps of a segmentation dataset that lists its image
        folder (mmseg's ``BaseSegDataset`` without ``ann_file``) whose
        image the listing left out: missing, or no regular file (a
        directory, a FIFO), which the listing skips without a word."""
        leaf = self.leaf
        prefix = getattr(leaf, 'data_prefix', None) or {}
        img_dir, ann_dir = prefix.get('img_path'), prefix.get('seg_map_path')
        img_suffix = getattr(leaf, 'img_suffix', None)
        seg_suffix = getattr(leaf, 'seg_map_suffix', None)
        ann_file = getattr(leaf, 'ann_file', '')
        if (not img_dir or not ann_dir or not img_suffix or not seg_suffix
                or (ann_file and not osp.isdir(ann_file))
                or not osp.isdir(ann_dir)):
            return []
        listed = {
            osp.normpath(self.leaf.get_data_info(i)['img_path'])
            for i in range(len(self.leaf))
        }
        faults = []
        for seg in sorted(
                fileio.list_dir_or_file(
                    ann_dir, list_dir=False, suffix=seg_suffix,
                    recursive=True)):
            img = osp.join(img_dir, seg[:-len(seg_suffix)] + img_suffix)
            if osp.normpath(img) in listed:
                continue
            fault = regular_file_fault(img) or Fault(
                'missing', img, 'not listed by the dataset')
            faults.append(
                fault._replace(
                    detail=f'{fault.detail} (the image of label map '
                    f'{osp.join(ann_dir, seg)}; the dataset lists its image '
                    'folder and leaves this sample out)'))
        return faults


def _annotated_hw(info: Dict) -> Optional[Tuple[int, int]]:
    """The image size the annotation states: mmdet's ``height`` /
    ``width`` (COCO ``images[]``, VOC ``<size>``) or mmlocat's box
    datasets' ``ann_img_shape``."""
    if info.get('ann_img_shape') is not None:
        h, w = info['ann_img_shape'][:2]
        return int(h), int(w)
    if 'height' in info and 'width' in info:
        return int(info['height']), int(info['width'])
    return None


def _step_name(step) -> str:
    return getattr(step, '__name__', None) or _name(step)


class _AllSamples(Dataset):
    """Every sample of every leaf, as a map-style dataset (data workers
    check samples in parallel)."""

    def __init__(self, leaves: List[_LeafChecks]) -> None:
        self.leaves = leaves
        self.offsets = np.cumsum([0] + [len(leaf) for leaf in leaves])

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def __getitem__(self, index: int):
        leaf = int(np.searchsorted(self.offsets, index, side='right')) - 1
        return self.leaves[leaf].check(index - int(self.offsets[leaf]))


def _as_is(item):
    return item


class DatasetReport:
    """What :func:`check_dataset` found.

    Attributes:
        name: The dataset's type name (and split, when known).
        samples: Samples checked.
        files: Files checked.
        faults: Every fault, in sample order.
        notes: Findings that are no fault (resized labels, long captions).
    """

    def __init__(self, name: str, samples: int, files: int,
                 faults: List[Fault], notes: List[Fault]) -> None:
        self.name = name
        self.samples = samples
        self.files = files
        self.faults = faults
        self.notes = notes

    @property
    def ok(self) -> bool:
        """No fault found."""
        return not self.faults

    def counts(self) -> Dict[str, int]:
        """Faults per kind, in :data:`FAULT_KINDS` order."""
        found = Counter(f.kind for f in self.faults)
        return {k: found[k] for k in FAULT_KINDS if found[k]}

    def format(self, max_names: int = 5) -> str:
        """The report: a summary line, then per kind the count and the
        first ``max_names`` files."""
        summary = ('no fault' if self.ok else f'{len(self.faults)} fault(s) ' +
                   ', '.join(f'{k} {n}' for k, n in self.counts().items()))
        lines = [
            f'{self.name}: {self.samples} samples, {self.files} files '
            f'checked: {summary}'
        ]
        for kinds, found in ((FAULT_KINDS, self.faults), (NOTE_KINDS,
                                                          self.notes)):
            for kind in kinds:
                items = [f for f in found if f.kind == kind]
                if not items:
                    continue
                label = (
                    kind if found is self.faults else f'warning: {kind}'
                    if kind in WARNING_KINDS else f'note: {kind}')
                lines.append(f'  {label} ({len(items)}):')
                lines += [f'    {f}' for f in items[:max_names]]
                if len(items) > max_names:
                    lines.append(f'    ... and {len(items) - max_names} more')
        return '\n'.join(lines)

    def to_dict(self) -> Dict:
        """Everything, for a JSON file."""
        return dict(
            name=self.name,
            samples=self.samples,
            files=self.files,
            counts=self.counts(),
            faults=[f._asdict() for f in self.faults],
            notes=[f._asdict() for f in self.notes])


def check_dataset(dataset,
                  name: Optional[str] = None,
                  num_workers: int = 0,
                  progress: bool = True) -> DatasetReport:
    """Read every sample of a built dataset and report its faults.

    Args:
        dataset: A built dataset (mmengine ``BaseDataset`` or a wrapper).
        name: Its name in the report (default: its type).
        num_workers: Data-loader workers reading samples in parallel.
        progress: Show a progress bar on stderr.
    """
    leaves = [_LeafChecks(leaf) for leaf in dataset_leaves(dataset)]
    samples = _AllSamples(leaves)
    loader = DataLoader(
        samples, batch_size=None, num_workers=num_workers, collate_fn=_as_is)
    bar = ProgressBar(len(samples), file=sys.stderr) if progress else None
    # samples that share a file (an image with several captions) report
    # its fault once
    faults: Dict[Tuple[str, str], Fault] = {}
    notes: Dict[Fault, None] = {}
    files = 0
    for leaf in leaves:
        for fault in leaf.listing_faults():
            faults.setdefault((fault.kind, fault.path), fault)
    for found, noted, read in loader:
        for fault in found:
            faults.setdefault((fault.kind, fault.path), fault)
        notes.update(dict.fromkeys(noted))
        files += read
        if bar is not None:
            bar.update()
    if bar is not None:
        sys.stderr.write('\n')
    return DatasetReport(
        name or type(dataset).__name__, len(samples), files,
        list(faults.values()), list(notes))


def build_split_dataset(cfg, split: str):
    """The dataset of ``cfg.<split>_dataloader``, built in the config's
    default scope (the hosts' registries)."""
    if split not in SPLITS:
        raise ValueError(f'split must be one of {SPLITS}, got {split!r}')
    loader = cfg.get(f'{split}_dataloader', None)
    if not loader or not loader.get('dataset'):
        raise ValueError(f'the config has no {split}_dataloader.dataset')
    init_default_scope(cfg.get('default_scope', 'mmengine'))
    dataset = DATASETS.build(loader['dataset'])
    if hasattr(dataset, 'full_init'):
        dataset.full_init()
    return dataset


def check_config_data(cfg,
                      splits: Sequence[str] = ('train', ),
                      num_workers: Optional[int] = None,
                      progress: bool = True) -> List[DatasetReport]:
    """:func:`check_dataset` on the datasets of a config's dataloaders.

    Args:
        cfg: An mmengine ``Config``.
        splits: Which dataloaders (``'train'``, ``'val'``, ``'test'``);
            splits the config lacks are left out.
        num_workers: Parallel readers; None: each dataloader's own
            ``num_workers``.
        progress: Show progress bars on stderr.
    """
    reports = []
    for split in splits:
        loader = cfg.get(f'{split}_dataloader', None)
        if not loader or not loader.get('dataset'):
            continue
        dataset = build_split_dataset(cfg, split)
        workers = (
            loader.get('num_workers', 0)
            if num_workers is None else num_workers)
        reports.append(
            check_dataset(
                dataset,
                name=f'{split} {type(dataset).__name__}',
                num_workers=workers,
                progress=progress))
    return reports


def reports_json(reports: List[DatasetReport]) -> str:
    """The reports as JSON text (``check_dataset.py --out``)."""
    return json.dumps([r.to_dict() for r in reports], indent=1)


def check_before_run(cfg,
                     splits: Sequence[str] = ('train', 'val'),
                     stream=None) -> bool:
    """``tools/train.py --check-data``: check the config's training and
    validation data, write the reports to ``stream`` (stderr) and say
    whether the data is clean."""
    reports = check_config_data(cfg, splits)
    stream = stream or sys.stderr
    for report in reports:
        print(report.format(), file=stream)
    clean = all(r.ok for r in reports)
    if not clean:
        print(
            'the data has faults (listed above): fix them, or run without '
            '--check-data / check_data=True',
            file=stream)
    return clean
