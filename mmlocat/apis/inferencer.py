"""One inference entry for every mmlocat task, on the hosts' inferencers.

:class:`MMLocatInferencer` reads a config, picks the task from it
(classification: mmpretrain ``ImageClassificationInferencer``;
segmentation: mmseg ``MMSegInferencer``; open-vocabulary detection: mmdet
``DetInferencer``; zero-shot segmentation: ``MMSegInferencer`` on
:class:`mmlocat.ZeroShotSegmentor`), checks that the checkpoint covers
the model (the same reader, errors and coverage check as ``tools/test.py``)
and, per image, returns a JSON-ready dict and writes a PNG::

    from mmlocat.apis import MMLocatInferencer
    inferencer = MMLocatInferencer(CONFIG, CHECKPOINT, classes='cat, dog')
    result = inferencer('photo.jpg', out_dir='out/')

Extension point: a task is a :class:`TaskHandler` subclass registered in
:data:`mmlocat.apis.tasks.INFERENCE_TASKS` (an mmengine ``Registry``); the
handler naming the config's model type serves it, else the one of its
``default_scope`` (:func:`mmlocat.apis.tasks.task_handler`; ambiguity is an
error). Zero-shot segmentation plugs in this way: its handler names
``ZeroShotSegmentor``, any other mmseg model gets the segmentation handler.

Pictures are drawn by the task's host visualizer, built from the config's
``visualizer`` as ``tools/test.py --show-dir`` builds it: mmpretrain
``UniversalVisualizer`` (the top-k labels and scores), mmseg
``SegLocalVisualizer`` (mmlocat's configs name its subclass
:class:`mmlocat.visualization.SegLegendVisualizer`, which adds a legend),
mmdet ``DetLocalVisualizer``; colours by
:func:`mmlocat.visualization.class_palette`.

Outputs (``out_dir``): the image's name with its extension, then
``.png`` (picture), ``.json`` (prediction) and, for segmentation,
``.labels.png`` (label map), below ``out_dir`` as below the input folder:
``x.jpg`` and ``x_labels.jpg`` (or ``x.png``) never share an output. A
name that two inputs would still share (the same relative name under two
input folders), or an output that would overwrite an input image, is an
error before anything is written.

Large images: a segmentor upsamples its logits to the image's size
(``num_classes x H x W`` floats: 14.4 GB for 150 classes at 6000x4000), so
images longer than ``max_side`` (segmentation default
:data:`SEG_MAX_SIDE`) are downscaled first and the label map is mapped
back to the image's size (nearest); detection boxes are mapped back too.
An image that still runs out of memory, cannot be read (a dangling link)
or fails in the model or the visualizer (a 1x1 image) is named, counted
and skipped; the others are still predicted.
"""
import copy
import functools
import gc
import json
import os
import os.path as osp
import warnings
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from mmengine.config import Config
from mmengine.logging import MMLogger, print_log
from mmengine.registry import DefaultScope
from mmengine.structures import PixelData

from mmlocat.datasets.class_file_record import model_class_files
from mmlocat.text import (BACKGROUND, dataset_metainfo, load_query_embeddings,
                          register_model_config, vocabulary_embeddings)
from mmlocat.utils.checkpoint_io import _first_line
from mmlocat.utils.launch import load_config, merge_cfg_options
from mmlocat.utils.pretrained import ModelCheckpoint, load_model_weights
from mmlocat.utils.records import check_class_files
from mmlocat.visualization.labels import format_score
from mmlocat.visualization.palette import class_palette
from . import vocabulary as voc
from .images import (downscale, image_notes, named_images, read_image_rgb,
                     unreadable_reason)
from .tasks import INFERENCE_TASKS, task_handler

__all__ = [
    'TaskHandler', 'ClassificationHandler', 'SegmentationHandler',
    'DetectionHandler', 'ZeroShotSegmentationHandler', 'MMLocatInferencer',
    'SEG_MAX_SIDE', 'plan_outputs', 'check_out_dir', 'is_out_of_memory'
]

#: Default ``max_side`` of (zero-shot) segmentation: no shipped config's
#: test pipeline feeds the network more than 2048 pixels on a side, so the
#: network sees the same resolution; only the logits' upsampling shrinks.
SEG_MAX_SIDE = 2048


def _unique_name(name: str) -> str:
    """``name``, or ``name-TIMESTAMP`` if a visualizer already has it (a
    visualizer is an mmengine ``ManagerMixin`` instance, one per name)."""
    from datetime import datetime

    from mmengine.visualization import Visualizer
    if Visualizer.check_instance_created(name):
        name = f'{name}-{datetime.timestamp(datetime.now())}'
    return name


def _build_visualizer(cfg: Config):
    """The config's ``visualizer`` (None if it has none), built as the
    hosts' inferencers build it (mmengine ``BaseInferencer``), in the
    current default scope."""
    if cfg.get('visualizer') is None:
        return None
    from mmengine.registry import VISUALIZERS
    vis_cfg = copy.deepcopy(cfg.visualizer)
    vis_cfg['name'] = _unique_name(vis_cfg.get('name', 'visualizer'))
    return VISUALIZERS.build(vis_cfg)


@functools.lru_cache(maxsize=None)
def _seg_inferencer_type() -> type:
    """mmseg's ``MMSegInferencer`` built without weights (the handler loads
    them) whose model meta and collate function are resolved, not guessed:

    * no weights: the model's ``dataset_meta`` is the handler's (the
      checkpoint's, else the config's test dataset; a zero-shot
      segmentor's embedding file), never mmseg's Cityscapes guess, which
      a :class:`mmlocat.ZeroShotSegmentor` would report as a foreign
      label space;
    * the collate function is looked up in mmengine's ``FUNCTIONS``
      registry, where the functions are: mmseg registers none, and the
      host's lookup in scope ``mmseg`` logs "Failed to search registry"
      before it falls back to mmengine's.
    """
    from mmengine.dataset import pseudo_collate
    from mmengine.registry import FUNCTIONS
    from mmseg.apis import MMSegInferencer

    class SegInferencer(MMSegInferencer):

        def __init__(self, model, meta: Dict, **kwargs) -> None:
            self._meta = meta  # read by BaseInferencer.__init__, below
            super().__init__(model, **kwargs)

        def _load_weights_to_model(self, model, checkpoint, cfg) -> None:
            if checkpoint is not None:
                super()._load_weights_to_model(model, checkpoint, cfg)
            elif self._meta.get('classes') is not None:
                model.dataset_meta = dict(
                    classes=self._meta['classes'],
                    palette=self._meta.get('palette'))

        def _init_collate(self, cfg):
            collate = (cfg.get('test_dataloader') or {}).get('collate_fn')
            if collate is None:
                return pseudo_collate  # the host's default
            # Registry.get resolves a scope prefix in the key alone
            return FUNCTIONS.get(collate)

    return SegInferencer


def score_labels(scores: Sequence[float],
                 names: Optional[Sequence[str]]) -> List[str]:
    """What a classification picture says after each label id
    (``3 (cat, 0.000123)``): the class name, where known, and the score
    by :func:`~mmlocat.visualization.labels.format_score`."""
    return [
        f'{names[i]}, {format_score(s)}'
        if names is not None and i < len(names) else format_score(s)
        for i, s in enumerate(scores)
    ]


def plan_outputs(named: Sequence[Tuple[str, str]], out_dir: str,
                 suffixes: Sequence[str]) -> List[str]:
    """The output stem of every input, checked before anything is written.

    Args:
        named: ``(image path, name)`` pairs (:func:`named_images`).
        out_dir: The output folder.
        suffixes: What each image's outputs append to its stem.

    Returns:
        ``out_dir/name`` for each input, in order.

    Raises:
        ValueError: If two inputs would write one file, or an output would
            overwrite an input image.
    """
    inputs = {osp.realpath(path): path for path, _ in named}
    stems, owner = [], {}
    for path, name in named:
        stem = osp.join(out_dir, name)
        for suffix in suffixes:
            out = osp.realpath(stem + suffix)
            if out in owner:
                raise ValueError(
                    f'{owner[out]} and {path} would both write '
                    f'{stem + suffix}: give them separate --out folders '
                    '(or run them one at a time)')
            if out in inputs:
                raise ValueError(
                    f'the output {stem + suffix} of {path} would overwrite '
                    f'the input image {inputs[out]}: choose another --out '
                    'folder')
            owner[out] = path
        stems.append(stem)
    return stems


def check_out_dir(out_dir: str, files: Sequence[Tuple[str, str]] = ()) -> None:
    """Refuse an output folder that is an existing file (or names one).

    ``os.makedirs`` would fail on it only when the first picture is
    written, after the model is built; and an input image, the checkpoint
    or the config named as ``--out`` by mistake must be left alone.

    Args:
        out_dir: The output folder (it may not exist yet).
        files: ``(what, path)`` of the files the run reads (e.g.
            ``('checkpoint', path)``), named in the message when
            ``out_dir`` is one of them.

    Raises:
        FileExistsError: ``out_dir`` exists and is not a folder, naming it
            (and which input it is) and the fix.
    """
    if not osp.lexists(out_dir) or osp.isdir(out_dir):
        return
    what = 'an existing file'
    for name, path in files:
        if (osp.exists(out_dir) and osp.isfile(path)
                and osp.samefile(out_dir, path)):
            what = f'the {name} {path}'
            break
    raise FileExistsError(
        f'--out {out_dir} is {what}, not a folder: --out names the folder '
        'the pictures and JSON go to; choose another (nothing was '
        'written)')


def is_out_of_memory(err: BaseException) -> bool:
    """Whether ``err`` is an allocation failure (CPU, CUDA, numpy, OpenCV).
    """
    if isinstance(err, MemoryError):  # numpy's _ArrayMemoryError too
        return True
    oom = getattr(torch, 'OutOfMemoryError', None)  # CUDA, torch >= 2.5
    if oom is not None and isinstance(err, oom):
        return True
    text = str(err)
    # torch's CPU allocator (RuntimeError), OpenCV's cv2.error
    return ("can't allocate memory" in text or 'out of memory' in text
            or 'Insufficient memory' in text)


def _image_fault(err: Exception, img: np.ndarray, max_side: int) -> str:
    """Why predicting one image failed, for its ``skipped`` record."""
    size = f'{img.shape[1]}x{img.shape[0]}'
    if is_out_of_memory(err):
        return (f'out of memory at {size} (max_side={max_side}): '
                f'{_first_line(err)}; a smaller --max-side bounds it')
    return f'failed at {size}: {type(err).__name__}: {_first_line(err)}'


def _dataset_meta(cfg: Config, checkpoint_meta: Dict, scope: str) -> Dict:
    """``classes`` / ``palette`` (lower-cased keys): the checkpoint's
    ``dataset_meta`` (in ``checkpoint_meta``) when it names classes (what
    the model was trained or converted with: it wins over the config),
    else the config's test
    dataset by :func:`mmlocat.text.dataset_metainfo`'s scope rule, in the
    host registry of the task (``scope``)."""
    meta = checkpoint_meta.get('dataset_meta') or {}
    meta = {k.lower(): v for k, v in meta.items()}
    if meta.get('classes'):
        return meta
    return dataset_metainfo(cfg, scope)


class TaskHandler:
    """One task: build the host inferencer, predict, serialise, draw.

    The host is built without weights; the checkpoint (read by the caller
    with :meth:`mmlocat.utils.pretrained.ModelCheckpoint.read`, so a bad
    file gets ``tools/test.py``'s one-sentence errors) is loaded by
    :func:`~mmlocat.utils.pretrained.load_model_weights`, which refuses a
    partly random network as ``tools/test.py`` does.

    Args:
        cfg: The model config (already merged with overrides).
        checkpoint: Weights file (its name in messages, its ``meta``).
        device: e.g. ``'cpu'``, ``'cuda:0'``.
        allow_partial: Run a checkpoint that misses model keys.
        options: Drawing options (``topk``, ``score_thr``, ``alpha``) and
            ``vocabulary``: the run-time class names (None: the config's).
        weights: The checkpoint, read.
    """
    task = ''
    #: The ``default_scope`` of the configs served.
    scope = ''
    #: The model types served (``cfg.model.type`` without its scope
    #: prefix); empty: any model of :attr:`scope` that no handler names
    #: (the rule of :func:`mmlocat.apis.tasks.task_handler`).
    model_types: Tuple[str, ...] = ()
    #: How a run-time vocabulary (``classes=``) is embedded when the text
    #: model's record does not say: ``templates``, ``prompt_style`` and
    #: whether a ``background`` row is appended; None: no vocabulary.
    vocabulary: Optional[Dict] = None
    #: Longest image side fed to the model unless ``max_side`` is given
    #: (None: any size).
    default_max_side: Optional[int] = None
    #: What the outputs of one image append to its output stem.
    suffixes: Tuple[str, ...] = ('.png', '.json')

    def __init__(self, cfg: Config, checkpoint: str, device: str,
                 allow_partial: bool, options: Dict,
                 weights: ModelCheckpoint) -> None:
        self.options = options
        self.meta = _dataset_meta(cfg, weights.meta, self.scope)
        with warnings.catch_warnings():
            # built without weights on purpose: they are loaded below
            warnings.filterwarnings(
                'ignore', message='(Checkpoint is not loaded|weights is None)')
            # the host's registries, whatever scope an earlier build left
            # (mmpretrain's inferencer builds its pipeline in the current one)
            with DefaultScope.overwrite_default_scope(self.scope):
                self.host = self.build_host(cfg, device)
        self.model = self.host.model
        load_model_weights(
            self.model,
            weights,
            strict=not allow_partial,
            partial_option='--allow-partial-checkpoint',
            logger=MMLogger.get_current_instance())
        if self.meta.get('classes') is not None:
            # what the host takes from a checkpoint's meta when it loads it
            known = {k: v for k, v in self.meta.items() if v is not None}
            self.model.dataset_meta = dict(
                getattr(self.model, 'dataset_meta', None) or {}, **known)
        self.model.eval()

    @property
    def classes(self) -> Optional[List[str]]:
        """Class names, or None when unknown or when their number is not
        the model's (names of another label space would mislabel)."""
        classes = self.meta.get('classes')
        if classes is None:
            return None
        num = self.num_classes()
        if num is not None and num != len(classes):
            if not getattr(self, '_warned', False):
                print_log(
                    f'infer: the model predicts {num} classes but the '
                    f'checkpoint / config dataset names {len(classes)}; '
                    'predictions are reported by label only',
                    logger='current',
                    level=30)
                self._warned = True
            return None
        return list(classes)

    def num_classes(self) -> Optional[int]:
        """The model's number of classes, where it says."""
        for name in ('head', 'decode_head'):
            num = getattr(getattr(self.model, name, None), 'num_classes', None)
            if isinstance(num, int):
                return num
        return None

    @classmethod
    def apply_vocabulary(cls, cfg: Config, embeddings_file: str,
                         names: Sequence[str]) -> None:
        """Point ``cfg`` at a run-time vocabulary's embedding file."""
        raise NotImplementedError

    def build_host(self, cfg: Config, device: str):
        """The host inferencer, built without weights."""
        raise NotImplementedError

    def predict(self, image: Union[str, np.ndarray]):
        """The host's data sample for an image file or a BGR array."""
        raise NotImplementedError

    def rescale(self, sample, shape: Tuple[int, int]):
        """The prediction on a downscaled copy, in the coordinates of the
        image of ``shape`` (H, W)."""
        return sample

    def to_dict(self, sample) -> Dict:
        """The JSON-ready prediction."""
        raise NotImplementedError

    def write_files(self, sample, out_stem: str) -> Dict:
        """Write task-specific files (``out_stem`` + one of
        :attr:`suffixes`) next to the PNG; returns their names for the
        JSON."""
        return {}

    def palette(self, names: Sequence[str]) -> List[List[int]]:
        """The colours of ``names``: the dataset's palette when they are
        its classes (:func:`~mmlocat.visualization.class_palette`)."""
        known = self.meta.get('classes')
        palette = self.meta.get('palette')
        if known is None or list(known) != list(names):
            palette = None  # the dataset's colours are other classes'
        return class_palette(len(names), palette)

    def draw(self, img_rgb: np.ndarray, sample, out_file: str) -> None:
        """Draw ``sample`` over ``img_rgb`` (RGB) with the host's
        visualizer into the PNG ``out_file``."""
        raise NotImplementedError


@INFERENCE_TASKS.register_module()
class ClassificationHandler(TaskHandler):
    """mmpretrain ``ImageClassificationInferencer``: top-k JSON; the
    picture is ``UniversalVisualizer.visualize_cls`` of the top-k labels.
    """
    task = 'classification'
    scope = 'mmpretrain'

    def build_host(self, cfg, device):
        from mmpretrain.apis import ImageClassificationInferencer
        host = ImageClassificationInferencer(
            cfg, pretrained=False, device=device)
        # the config's visualizer, as tools/test.py builds it (the host
        # inferencer falls back to a default UniversalVisualizer() at draw)
        host.visualizer = _build_visualizer(cfg)
        return host

    def predict(self, image):
        # the host's own preprocess and forward (its __call__ adds a
        # progress bar per call)
        data = next(iter(self.host.preprocess([image])))
        return self.host.forward(data)[0]

    def to_dict(self, sample):
        scores = sample.pred_score.detach().float().cpu().numpy()
        order = np.argsort(-scores, kind='stable')[:self.options['topk']]
        names = self.classes
        label = int(order[0])

        def name(i):
            return names[i] if names is not None and i < len(names) else None

        return dict(
            pred_label=label,
            pred_class=name(label),
            pred_score=float(scores[label]),
            topk=[
                dict(label=int(i), cls=name(int(i)), score=float(scores[i]))
                for i in order
            ],
            pred_scores=[float(s) for s in scores])

    def draw(self, img_rgb, sample, out_file):
        if self.host.visualizer is None:
            from mmpretrain.visualization import UniversalVisualizer
            self.host.visualizer = UniversalVisualizer(
                name=_unique_name('visualizer'))
        scores = sample.pred_score.detach().float().cpu()
        order = torch.argsort(-scores, stable=True)[:self.options['topk']]
        # the host draws one line per predicted label: the top k, best first
        shown = sample.clone().set_pred_label(order)
        self.host.visualizer.visualize_cls(
            img_rgb,
            shown,
            classes=score_labels(scores.tolist(), self.classes),
            draw_gt=False,
            draw_pred=True,
            # the host prints '0.00' for every score under 0.005
            draw_score=False,
            name=osp.basename(out_file),
            out_file=out_file)


@INFERENCE_TASKS.register_module()
class SegmentationHandler(TaskHandler):
    """mmseg ``MMSegInferencer``: a label PNG, class areas and the
    picture of the config's visualizer (mmlocat's configs: a legend)."""
    task = 'segmentation'
    scope = 'mmseg'
    default_max_side = SEG_MAX_SIDE
    suffixes = ('.png', '.json', '.labels.png')

    def build_host(self, cfg, device):
        classes = self.meta.get('classes')
        # as many colours as classes (a subset of a dataset's classes
        # keeps its full palette in the config's metainfo)
        palette = self.palette(classes) if classes else None
        host = _seg_inferencer_type()(
            cfg,
            dict(classes=classes, palette=palette),
            weights=None,
            classes=classes,
            palette=palette,
            device=device)
        host.show_progress = False  # tools/infer.py has its own bar
        return host

    def predict(self, image):
        return self.host(image, return_datasamples=True)

    def rescale(self, sample, shape):
        """The label map at ``shape`` (nearest); the logits, at the
        inference size, are not kept."""
        labels = sample.pred_sem_seg.data[0]
        for dim, size in enumerate(shape):
            # the source pixel whose centre is nearest each target centre
            src = labels.shape[dim]
            index = ((torch.arange(size) + 0.5) * (src / size)).long()
            labels = labels.index_select(
                dim,
                index.clamp_(max=src - 1).to(labels.device))
        out = sample.__class__(
            metainfo=dict(sample.metainfo, ori_shape=tuple(shape)))
        out.pred_sem_seg = PixelData(data=labels[None])
        return out

    def _labels(self, sample) -> np.ndarray:
        return sample.pred_sem_seg.data[0].cpu().numpy()

    def write_files(self, sample, out_stem):
        import cv2
        labels = self._labels(sample)
        # the raw label map, lossless (uint16 for more than 256 classes)
        dtype = np.uint8 if labels.max(initial=0) < 256 else np.uint16
        label_file = out_stem + '.labels.png'
        if not cv2.imwrite(label_file, labels.astype(dtype)):
            raise OSError(f'could not write {label_file}')
        return dict(label_png=label_file)

    def to_dict(self, sample):
        labels = self._labels(sample)
        present, counts = np.unique(labels, return_counts=True)
        names = self.classes
        return dict(
            shape=list(labels.shape),
            classes=[
                dict(
                    label=int(c),
                    cls=names[c] if names and c < len(names) else None,
                    pixels=int(n)) for c, n in zip(present, counts)
            ])

    def draw(self, img_rgb, sample, out_file):
        names = self.classes
        if names is None:  # the host would name them by Cityscapes'
            num = self.num_classes() or int(self._labels(sample).max()) + 1
            names = [f'class {i}' for i in range(num)]
        visualizer = self.host.visualizer
        visualizer.set_dataset_meta(names, self.palette(names))
        visualizer.alpha = self.options['alpha']
        # as MMSegInferencer.visualize: the prediction only
        visualizer.add_datasample(
            osp.basename(out_file),
            img_rgb,
            sample,
            draw_gt=False,
            draw_pred=True,
            out_file=out_file)


@INFERENCE_TASKS.register_module()
class DetectionHandler(TaskHandler):
    """mmdet ``DetInferencer``: every box in the JSON, boxes above
    ``score_thr`` drawn. Class names are the box head's (for F-ViT the
    vocabulary it was built with)."""
    task = 'detection'
    scope = 'mmdet'
    vocabulary = dict(templates='fvit', prompt_style='fvit', background=True)

    @classmethod
    def apply_vocabulary(cls, cfg, embeddings_file, names):
        voc.apply_vocabulary(cfg, embeddings_file, names)

    def build_host(self, cfg, device):
        from mmdet.apis import DetInferencer
        return DetInferencer(
            cfg, weights=None, device=device, show_progress=False)

    @property
    def classes(self):
        head = getattr(
            getattr(self.model, 'roi_head', None), 'bbox_head', None)
        names = getattr(head, 'class_names', None)
        return list(names) if names is not None else super().classes

    def predict(self, image):
        out = self.host(
            image, return_datasamples=True, no_save_vis=True, out_dir='')
        return out['predictions'][0]

    def rescale(self, sample, shape):
        h, w = sample.ori_shape
        out = sample.__class__(
            metainfo=dict(sample.metainfo, ori_shape=tuple(shape)))
        inst = sample.pred_instances.clone()
        inst.bboxes = inst.bboxes * inst.bboxes.new_tensor(
            [shape[1] / w, shape[0] / h] * 2)
        out.pred_instances = inst
        return out

    @staticmethod
    def _arrays(sample):
        inst = sample.pred_instances
        return (inst.bboxes.detach().float().cpu().numpy(),
                inst.labels.cpu().numpy(),
                inst.scores.detach().float().cpu().numpy())

    def to_dict(self, sample):
        bboxes, labels, scores = self._arrays(sample)
        names = self.classes
        return dict(
            classes=names,
            instances=[
                dict(
                    bbox=[float(v) for v in box],
                    label=int(label),
                    cls=names[label] if names and label < len(names) else None,
                    score=float(score))
                for box, label, score in zip(bboxes, labels, scores)
            ])

    def draw(self, img_rgb, sample, out_file):
        names = self.classes
        if names is not None:
            palette = self.palette(names)
        else:  # labelled 'class N' by the host
            labels = sample.pred_instances.labels
            palette = class_palette(
                int(labels.max()) + 1 if len(labels) else 1)
        visualizer = self.host.visualizer
        # mmdet's palettes are lists of tuples
        visualizer.dataset_meta = dict(
            classes=names, palette=[tuple(c) for c in palette])
        # as DetInferencer.visualize: the prediction only
        visualizer.add_datasample(
            osp.basename(out_file),
            img_rgb,
            sample,
            draw_gt=False,
            draw_pred=True,
            pred_score_thr=self.options['score_thr'],
            out_file=out_file)


@INFERENCE_TASKS.register_module()
class ZeroShotSegmentationHandler(SegmentationHandler):
    """:class:`mmlocat.ZeroShotSegmentor` on mmseg ``MMSegInferencer``:
    the segmentation files and JSON; class names are the segmentor's (its
    embedding file's), with the background class first when it has a
    ``bg_thresh``. Without a run-time vocabulary they must be the test
    dataset's, in order, as ``tools/test.py`` requires."""
    task = 'zero-shot segmentation'
    model_types = ('ZeroShotSegmentor', )
    # CLIP's 80 ImageNet templates filled plainly: the zero-shot configs'
    # embeddings (configs/last/README.md); the segmentor refuses a
    # background row
    vocabulary = dict(
        templates='imagenet80', prompt_style='plain', background=False)

    @classmethod
    def apply_vocabulary(cls, cfg, embeddings_file, names):
        voc.apply_zero_shot_vocabulary(cfg, embeddings_file, names)

    def __init__(self, cfg, checkpoint, device, allow_partial, options,
                 weights):
        super().__init__(cfg, checkpoint, device, allow_partial, options,
                         weights)
        dataset_classes = self.dataset_classes
        if options.get('vocabulary') is None and dataset_classes:
            # the same refusal as ZeroShotClassCheckHook in tools/test.py
            self.model.check_classes(dataset_classes)

    def build_host(self, cfg, device):
        model = cfg.model
        names = load_query_embeddings(model['text_embeddings']).classes
        if model.get('bg_thresh') is not None:
            names = [model.get('background_class', BACKGROUND)] + names
        self.dataset_classes = self.meta.get('classes')
        # the host's visualizer wants as many colours as classes
        self.meta = dict(classes=names, palette=self.palette(names))
        return super().build_host(cfg, device)

    def num_classes(self):
        return self.model.num_classes


#: Where the READMEs put downloaded weights (relative to the working
#: folder), searched last for a recorded text-weights file.
WEIGHTS_DIR = 'checkpoints'


def text_weights_dirs(embeddings_file: str, checkpoint: str) -> List[str]:
    """The folders searched, in order, for the CLIP text weights a
    checkpoint or an embedding sidecar records by file name: the sidecar's
    (embedding file's) folder, the checkpoint's folder, ``./checkpoints``
    (the READMEs' layout)."""
    dirs = [osp.dirname(embeddings_file), osp.dirname(checkpoint), WEIGHTS_DIR]
    return [d for i, d in enumerate(dirs) if d and d not in dirs[:i]]


class MMLocatInferencer:
    """From images to JSON-ready predictions and PNG pictures.

    Args:
        config: Config file or :class:`mmengine.Config`.
        checkpoint: Weights file.
        device: e.g. ``'cpu'``, ``'cuda:0'``.
        classes: Open-vocabulary detection and zero-shot segmentation
            only: class names typed at run time (``"cat, remote
            control"``, a list, or a ``.txt`` / ``.json`` file), embedded
            with the model's CLIP text tower
            (:mod:`mmlocat.apis.vocabulary`).
        text_model: open_clip name of that tower when nothing records it.
        text_weights: Its weights when the recorded file is not found.
        text_model_config: An open_clip model-config JSON to register.
        vocab_cache: Cache folder of the vocabulary embeddings.
        cfg_options: Config overrides
            (:func:`~mmlocat.utils.launch.merge_cfg_options`: a top-level
            key the config does not have is refused).
        cfg_new_keys: Top-level keys ``cfg_options`` may add on purpose.
        allow_partial_checkpoint: Run even if the checkpoint misses keys.
        allow_class_file_change: Run even if the text-embedding / class-name
            files of the config differ from those the checkpoint was
            trained with (its ``meta['class_files']``; without ``classes``
            only: typed classes are a new vocabulary by design).
        topk: Classes in the classification bars and JSON.
        score_thr: Boxes drawn from this score (the JSON has all).
        alpha: Opacity of the segmentation mask.
        max_side: Images whose longer side exceeds it are downscaled
            (aspect kept) before the model and the prediction is mapped
            back to the image; None: the task's default (segmentation
            :data:`SEG_MAX_SIDE`, otherwise none), 0: never.
    """

    def __init__(self,
                 config: Union[str, Config],
                 checkpoint: str,
                 device: str = 'cpu',
                 classes: Union[None, str, Sequence[str]] = None,
                 text_model: Optional[str] = None,
                 text_weights: Optional[str] = None,
                 text_model_config: Optional[str] = None,
                 vocab_cache: Optional[str] = None,
                 cfg_options: Optional[Dict] = None,
                 cfg_new_keys: Sequence[str] = (),
                 allow_partial_checkpoint: bool = False,
                 allow_class_file_change: bool = False,
                 topk: int = 5,
                 score_thr: float = 0.3,
                 alpha: float = 0.5,
                 max_side: Optional[int] = None) -> None:
        for path in ([config]
                     if isinstance(config, str) else []) + [checkpoint]:
            if not osp.isfile(path):
                raise FileNotFoundError(f'file not found: {path}')
        if topk < 1:
            raise ValueError(f'topk must be >= 1, got {topk}')
        if not 0 <= alpha <= 1:
            raise ValueError(f'alpha must be in [0, 1], got {alpha}')
        if max_side is not None and (isinstance(max_side, bool)
                                     or not isinstance(max_side, int)
                                     or max_side < 0):
            raise ValueError('max_side must be an int >= 0 (0: no limit), '
                             f'got {max_side!r}')
        # read first, by tools/test.py's reader: a bad file is named in one
        # sentence before anything is built or embedded
        weights = ModelCheckpoint.read(checkpoint)
        # a Config passed in is not changed (overrides, vocabulary)
        cfg = (
            load_config(config)
            if isinstance(config, str) else copy.deepcopy(config))
        merge_cfg_options(cfg, cfg_options, cfg_new_keys)
        handler = task_handler(cfg)
        if classes is not None:
            if handler.vocabulary is None:
                raise ValueError(
                    'classes= (--classes) is for open-vocabulary detection '
                    f'and zero-shot segmentation; {cfg.filename} is a '
                    f'{handler.task} config')
            self.vocabulary = self._vocabulary(handler, cfg, checkpoint,
                                               weights.meta, classes,
                                               text_model, text_weights,
                                               text_model_config, vocab_cache,
                                               device)
        else:
            self.vocabulary = None
        self.handler = handler(
            cfg, checkpoint, device, allow_partial_checkpoint,
            dict(
                topk=topk,
                score_thr=score_thr,
                alpha=alpha,
                vocabulary=self.vocabulary), weights)
        meta = weights.meta
        model = self.handler.model
        if self.vocabulary is None and hasattr(model,
                                               'check_tower_checkpoint'):
            # the tower loaded is the one run (as tools/test.py's hook)
            model.check_tower_checkpoint(checkpoint, loaded=weights.checkpoint)
        del weights  # copied into the model: free its tensors
        if self.vocabulary is None:
            check_class_files(
                model_class_files(self.handler.model),
                checkpoint,
                allow_change=allow_class_file_change,
                meta=meta)
        self.task = handler.task
        self.max_side = (
            handler.default_max_side if max_side is None else max_side)

    @staticmethod
    def _vocabulary(handler, cfg, checkpoint, checkpoint_meta, classes,
                    text_model, text_weights, text_model_config, vocab_cache,
                    device) -> List[str]:
        names = voc.parse_vocabulary(classes)
        if text_model_config is not None:
            registered = register_model_config(text_model_config)
            text_model = text_model or registered
        record, where = voc.recorded_text_model(cfg, checkpoint,
                                                checkpoint_meta)
        emb_file = voc.embeddings_file(cfg) or ''
        name, weights = voc.resolve_text_model(
            record,
            where,
            text_model=text_model,
            text_weights=text_weights,
            search_dirs=text_weights_dirs(emb_file, checkpoint))
        # the prompts of the config's own embeddings where recorded
        defaults = handler.vocabulary
        path = vocabulary_embeddings(
            names,
            name,
            weights,
            templates=record.get('templates', defaults['templates']),
            prompt_style=record.get('prompt_style', defaults['prompt_style']),
            background=defaults['background'],
            cache_dir=vocab_cache,
            device=device,
            # a named list as shipped (open_clip's ImageNet names)
            repeated_names=len(set(names)) != len(names))
        handler.apply_vocabulary(cfg, path, names)
        return names

    @property
    def model(self) -> torch.nn.Module:
        return self.handler.model

    @property
    def classes(self) -> Optional[List[str]]:
        return self.handler.classes

    def __call__(self,
                 inputs: Union[str, Sequence[str]],
                 out_dir: Optional[str] = None,
                 show_progress: bool = False) -> Dict:
        """Predict images (files or folders).

        Args:
            inputs: Image file(s) and / or folder(s).
            out_dir: Where ``NAME.png`` (picture) and ``NAME.json``
                (prediction) go, ``NAME`` being the image's file name with
                its extension, below ``out_dir`` as below the input folder
                (segmentation and zero-shot segmentation also write
                ``NAME.labels.png``); None writes nothing. Names two
                inputs would share, or outputs that would overwrite an
                input, are an error before anything is written. An
                ``out_dir`` inside an input folder is not searched for
                images.
            show_progress: A tqdm bar over the images.

        Returns:
            ``dict(predictions=[...], skipped=[...])``: one dict per image
            (``image``, ``task``, the task's fields, the host's
            ``data_sample``; ``png`` / ``json`` when written;
            ``inference_shape`` when it was downscaled to ``max_side``;
            ``input_notes`` when decoding changed it: EXIF orientation,
            alpha, CMYK, grayscale, 16-bit, see :func:`image_notes`) and,
            for images that cannot be read, run out of memory or fail
            (e.g. a 1x1 image), ``dict(image=..., reason=...)``.
        """
        named = named_images(inputs, skip_dir=out_dir)
        stems = [None] * len(named)
        if out_dir is not None:
            check_out_dir(out_dir, [('input image', p) for p, _ in named])
            stems = plan_outputs(named, out_dir, self.handler.suffixes)
        iterator = zip(named, stems)
        if show_progress:
            from tqdm import tqdm
            iterator = tqdm(
                iterator, total=len(named), desc=f'infer ({self.task})')
        predictions, skipped = [], []

        def skip(path, reason):
            print_log(
                f'infer: skipped {path}: {reason}', logger='current', level=30)
            skipped.append(dict(image=path, reason=reason))

        for (path, _), out_stem in iterator:
            img = read_image_rgb(path)
            if img is None:
                skip(path, unreadable_reason(path))
                continue
            fault = None
            try:
                record = self._predict(path, img, out_stem)
            except Exception as err:
                # one image's fault (out of memory, a size the model or
                # the host's visualizer cannot take) ends its prediction,
                # not the run
                fault = _image_fault(err, img, self.max_side)
            if fault is not None:
                # the failed attempt's tensors went with the traceback
                gc.collect()
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
                skip(path, fault)
                continue
            predictions.append(record)
        return dict(predictions=predictions, skipped=skipped)

    def _predict(self, path: str, img: np.ndarray,
                 out_stem: Optional[str]) -> Dict:
        """One image: predict (downscaled past ``max_side``), draw, write.
        """
        handler = self.handler
        shape = img.shape[:2]
        small = downscale(img, self.max_side) if self.max_side else img
        record = dict(image=path, task=self.task)
        notes = image_notes(path)
        if notes:
            record['input_notes'] = notes
            print_log(f'infer: {path}: {"; ".join(notes)}', logger='current')
        with torch.no_grad():
            if small is img:
                sample = handler.predict(path)
            else:  # the hosts take BGR arrays
                sample = handler.predict(
                    np.ascontiguousarray(small[..., ::-1]))
                record['inference_shape'] = list(small.shape[:2])
                print_log(
                    f'infer: {path} is {shape[1]}x{shape[0]}: predicted at '
                    f'{small.shape[1]}x{small.shape[0]} (max_side='
                    f'{self.max_side}), mapped back to the image',
                    logger='current')
        if out_stem is not None:
            os.makedirs(osp.dirname(out_stem) or '.', exist_ok=True)
            # the picture at the inference size (a preview; bounded memory)
            handler.draw(small, sample, out_stem + '.png')
        if small is not img:
            sample = handler.rescale(sample, shape)
        record.update(handler.to_dict(sample))
        if out_stem is not None:
            record.update(handler.write_files(sample, out_stem))
            record.update(png=out_stem + '.png', json=out_stem + '.json')
            with open(out_stem + '.json', 'w', encoding='utf-8') as f:
                json.dump(record, f, indent=1)
        return dict(record, data_sample=sample)
