"""One inference entry for every mmlocat task, on the hosts' inferencers.

:class:`MMLocatInferencer` reads a config, picks the task from it
(classification: mmpretrain ``ImageClassificationInferencer``;
segmentation: mmseg ``MMSegInferencer``; open-vocabulary detection: mmdet
``DetInferencer``; zero-shot segmentation: ``MMSegInferencer`` on
:class:`mmlocat.ZeroShotSegmentor`), checks that the checkpoint covers
the model (as ``tools/test.py`` does) and, per image, returns a JSON-ready
dict and writes a PNG::

    from mmlocat.apis import MMLocatInferencer
    inferencer = MMLocatInferencer(CONFIG, CHECKPOINT, classes='cat, dog')
    result = inferencer('photo.jpg', out_dir='out/')

Extension point: a task is a :class:`TaskHandler` subclass registered with
:func:`register_task`; the first registered handler whose ``matches(cfg)``
is true serves a config. Zero-shot segmentation plugs in this way: a
handler registered with ``first=True`` that matches its model type (it is
an mmseg config too).
"""
import copy
import json
import os
import os.path as osp
from typing import Dict, List, Optional, Sequence, Type, Union

import numpy as np
import torch
from mmengine.config import Config
from mmengine.logging import MMLogger, print_log

from mmlocat.datasets.text_embeddings import BACKGROUND, load_query_embeddings
from mmlocat.utils.launch import load_config
from mmlocat.utils.pretrained import check_checkpoint_covers
from mmlocat.utils.provenance import read_checkpoint_meta
from mmlocat.visualization.predictions import (draw_classification,
                                               draw_detection,
                                               draw_segmentation, label_colors)
from . import vocabulary as voc
from .images import collect_images, read_image_rgb

__all__ = [
    'TaskHandler', 'ClassificationHandler', 'SegmentationHandler',
    'DetectionHandler', 'ZeroShotSegmentationHandler', 'TASK_HANDLERS',
    'register_task', 'task_handler', 'MMLocatInferencer'
]

TASK_HANDLERS: List[Type['TaskHandler']] = []


def register_task(handler: Type['TaskHandler'],
                  first: bool = False) -> Type['TaskHandler']:
    """Register a task handler (``first``: ahead of the built-in ones)."""
    if first:
        TASK_HANDLERS.insert(0, handler)
    else:
        TASK_HANDLERS.append(handler)
    return handler


def task_handler(cfg: Config) -> Type['TaskHandler']:
    """The handler that serves ``cfg``."""
    for handler in TASK_HANDLERS:
        if handler.matches(cfg):
            return handler
    raise ValueError(f'{cfg.filename}: no inference task for default_scope='
                     f'{cfg.get("default_scope")!r}; known tasks: '
                     f'{[h.task for h in TASK_HANDLERS]} (scopes '
                     f'{[h.scope for h in TASK_HANDLERS]})')


def _dataset_meta(cfg: Config, checkpoint: str, scope: str) -> Dict:
    """``classes`` / ``palette``: the checkpoint's ``dataset_meta``, else
    the config's test dataset (its ``metainfo`` or its type's METAINFO)."""
    meta = read_checkpoint_meta(checkpoint).get('dataset_meta') or {}
    meta = {k.lower(): v for k, v in meta.items()}
    if meta.get('classes'):
        return meta
    dataset = cfg.get('test_dataloader', {}).get('dataset', {})
    info = dict(dataset.get('metainfo') or {})
    if not info.get('classes') and dataset.get('type'):
        from mmengine.registry import DATASETS
        with DATASETS.switch_scope_and_registry(scope) as registry:
            dataset_cls = registry.get(dataset['type'])
        info = dict(getattr(dataset_cls, 'METAINFO', {}) or {}, **info)
    return {k.lower(): v for k, v in info.items()}


class TaskHandler:
    """One task: build the host inferencer, predict, serialise, draw.

    Args:
        cfg: The model config (already merged with overrides).
        checkpoint: Weights file.
        device: e.g. ``'cpu'``, ``'cuda:0'``.
        allow_partial: Run a checkpoint that misses model keys.
        options: Drawing options (``topk``, ``score_thr``, ``alpha``) and
            ``vocabulary``: the run-time class names (None: the config's).
    """
    task = ''
    scope = ''
    #: How a run-time vocabulary (``classes=``) is embedded when the text
    #: model's record does not say: ``templates``, ``prompt_style`` and
    #: whether a ``background`` row is appended; None: no vocabulary.
    vocabulary: Optional[Dict] = None

    @classmethod
    def matches(cls, cfg: Config) -> bool:
        return cfg.get('default_scope') == cls.scope

    def __init__(self, cfg: Config, checkpoint: str, device: str,
                 allow_partial: bool, options: Dict) -> None:
        self.options = options
        self.meta = _dataset_meta(cfg, checkpoint, self.scope)
        self.host = self.build_host(cfg, checkpoint, device)
        self.model = self.host.model
        # the hosts load leniently; refuse a partly random network as
        # tools/test.py does (same helper, same messages)
        check_checkpoint_covers(
            self.model,
            checkpoint,
            allow_partial=allow_partial,
            logger=MMLogger.get_current_instance())
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

    def build_host(self, cfg: Config, checkpoint: str, device: str):
        raise NotImplementedError

    def predict(self, path: str):
        raise NotImplementedError

    def to_dict(self, sample) -> Dict:
        """The JSON-ready prediction."""
        raise NotImplementedError

    def write_files(self, sample, out_stem: str) -> Dict:
        """Write task-specific files next to the PNG; returns their names
        for the JSON."""
        return {}

    def draw(self, img_rgb: np.ndarray, sample, out_file: str) -> None:
        raise NotImplementedError


class ClassificationHandler(TaskHandler):
    """mmpretrain ``ImageClassificationInferencer``: top-k JSON and bars."""
    task = 'classification'
    scope = 'mmpretrain'

    def build_host(self, cfg, checkpoint, device):
        from mmpretrain.apis import ImageClassificationInferencer
        return ImageClassificationInferencer(
            cfg, pretrained=checkpoint, device=device)

    def predict(self, path):
        # the host's own preprocess and forward (its __call__ adds a
        # progress bar per call)
        data = next(iter(self.host.preprocess([path])))
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
        draw_classification(
            img_rgb,
            sample.pred_score.detach().float().cpu().numpy(),
            out_file,
            classes=self.classes,
            topk=self.options['topk'])


class SegmentationHandler(TaskHandler):
    """mmseg ``MMSegInferencer``: a label PNG, class areas and a mask
    picture with a legend."""
    task = 'segmentation'
    scope = 'mmseg'

    def build_host(self, cfg, checkpoint, device):
        from mmseg.apis import MMSegInferencer
        host = MMSegInferencer(
            cfg,
            weights=checkpoint,
            classes=self.meta.get('classes'),
            palette=self.meta.get('palette'),
            device=device)
        host.show_progress = False  # tools/infer.py has its own bar
        return host

    def predict(self, path):
        return self.host(path, return_datasamples=True)

    def _labels(self, sample) -> np.ndarray:
        return sample.pred_sem_seg.data[0].cpu().numpy()

    def write_files(self, sample, out_stem):
        import cv2
        labels = self._labels(sample)
        # the raw label map, lossless (uint16 for more than 256 classes)
        dtype = np.uint8 if labels.max(initial=0) < 256 else np.uint16
        label_file = out_stem + '_labels.png'
        cv2.imwrite(label_file, labels.astype(dtype))
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
        draw_segmentation(
            img_rgb,
            self._labels(sample),
            out_file,
            classes=self.classes,
            palette=self.meta.get('palette'),
            alpha=self.options['alpha'])


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

    def build_host(self, cfg, checkpoint, device):
        from mmdet.apis import DetInferencer
        return DetInferencer(
            cfg, weights=checkpoint, device=device, show_progress=False)

    @property
    def classes(self):
        head = getattr(
            getattr(self.model, 'roi_head', None), 'bbox_head', None)
        names = getattr(head, 'class_names', None)
        return list(names) if names is not None else super().classes

    def predict(self, path):
        out = self.host(
            path, return_datasamples=True, no_save_vis=True, out_dir='')
        return out['predictions'][0]

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
        bboxes, labels, scores = self._arrays(sample)
        draw_detection(
            img_rgb,
            bboxes,
            labels,
            scores,
            out_file,
            classes=self.classes,
            score_thr=self.options['score_thr'])


class ZeroShotSegmentationHandler(SegmentationHandler):
    """:class:`mmlocat.ZeroShotSegmentor` on mmseg ``MMSegInferencer``:
    the segmentation files and JSON; class names are the segmentor's (its
    embedding file's), with the background class first when it has a
    ``bg_thresh``. Without a run-time vocabulary they must be the test
    dataset's, in order, as ``tools/test.py`` requires."""
    task = 'zero-shot segmentation'
    # CLIP's 80 ImageNet templates filled plainly: the zero-shot configs'
    # embeddings (configs/last/README.md); the segmentor refuses a
    # background row
    vocabulary = dict(
        templates='imagenet80', prompt_style='plain', background=False)

    @classmethod
    def matches(cls, cfg):
        return voc.is_zero_shot_config(cfg)

    @classmethod
    def apply_vocabulary(cls, cfg, embeddings_file, names):
        voc.apply_zero_shot_vocabulary(cfg, embeddings_file, names)

    def __init__(self, cfg, checkpoint, device, allow_partial, options):
        super().__init__(cfg, checkpoint, device, allow_partial, options)
        dataset_classes = self.dataset_classes
        if options.get('vocabulary') is None and dataset_classes:
            # the same refusal as ZeroShotClassCheckHook in tools/test.py
            self.model.check_classes(dataset_classes)

    def build_host(self, cfg, checkpoint, device):
        model = cfg.model
        names = load_query_embeddings(model['text_embeddings']).classes
        if model.get('bg_thresh') is not None:
            names = [model.get('background_class', BACKGROUND)] + names
        self.dataset_classes = self.meta.get('classes')
        palette = self.meta.get('palette')
        if list(self.dataset_classes or []) != names:
            palette = None  # the dataset's colours are other classes'
        # the host's visualizer wants as many colours as classes
        self.meta = dict(
            classes=names, palette=label_colors(len(names), palette).tolist())
        return super().build_host(cfg, checkpoint, device)

    def num_classes(self):
        return self.model.num_classes


for _handler in (ClassificationHandler, SegmentationHandler, DetectionHandler):
    register_task(_handler)
register_task(ZeroShotSegmentationHandler, first=True)


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
        cfg_options: Config overrides (``merge_from_dict``).
        allow_partial_checkpoint: Run even if the checkpoint misses keys.
        topk: Classes in the classification bars and JSON.
        score_thr: Boxes drawn from this score (the JSON has all).
        alpha: Opacity of the segmentation mask.
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
                 allow_partial_checkpoint: bool = False,
                 topk: int = 5,
                 score_thr: float = 0.3,
                 alpha: float = 0.5) -> None:
        for path in ([config]
                     if isinstance(config, str) else []) + [checkpoint]:
            if not osp.isfile(path):
                raise FileNotFoundError(f'file not found: {path}')
        if topk < 1:
            raise ValueError(f'topk must be >= 1, got {topk}')
        if not 0 <= alpha <= 1:
            raise ValueError(f'alpha must be in [0, 1], got {alpha}')
        # a Config passed in is not changed (overrides, vocabulary)
        cfg = (
            load_config(config)
            if isinstance(config, str) else copy.deepcopy(config))
        if cfg_options:
            cfg.merge_from_dict(cfg_options)
        handler = task_handler(cfg)
        if classes is not None:
            if handler.vocabulary is None:
                raise ValueError(
                    'classes= (--classes) is for open-vocabulary detection '
                    f'and zero-shot segmentation; {cfg.filename} is a '
                    f'{handler.task} config')
            self.vocabulary = self._vocabulary(handler, cfg, checkpoint,
                                               classes, text_model,
                                               text_weights, text_model_config,
                                               vocab_cache, device)
        else:
            self.vocabulary = None
        self.handler = handler(
            cfg, checkpoint, device, allow_partial_checkpoint,
            dict(
                topk=topk,
                score_thr=score_thr,
                alpha=alpha,
                vocabulary=self.vocabulary))
        self.task = handler.task

    @staticmethod
    def _vocabulary(handler, cfg, checkpoint, classes, text_model,
                    text_weights, text_model_config, vocab_cache,
                    device) -> List[str]:
        names = voc.parse_vocabulary(classes)
        if text_model_config is not None:
            registered = voc.register_model_config(text_model_config)
            text_model = text_model or registered
        record, where = voc.recorded_text_model(cfg, checkpoint)
        emb_file = voc.embeddings_file(cfg) or ''
        name, weights = voc.resolve_text_model(
            record,
            where,
            text_model=text_model,
            text_weights=text_weights,
            search_dirs=[osp.dirname(emb_file),
                         osp.dirname(checkpoint)])
        # the prompts of the config's own embeddings where recorded
        defaults = handler.vocabulary
        path = voc.vocabulary_embeddings(
            names,
            name,
            weights,
            templates=record.get('templates', defaults['templates']),
            prompt_style=record.get('prompt_style', defaults['prompt_style']),
            background=defaults['background'],
            cache_dir=vocab_cache,
            device=device)
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
                (prediction) go (segmentation and zero-shot segmentation
                also ``NAME_labels.png``);
                None writes nothing.
            show_progress: A tqdm bar over the images.

        Returns:
            ``dict(predictions=[...], skipped=[...])``: one dict per image
            (``image``, ``task``, the task's fields, the host's
            ``data_sample``; ``png`` / ``json`` when written) and, for
            images that cannot be read, ``dict(image=..., reason=...)``.
        """
        images = collect_images(inputs)
        if out_dir is not None:
            os.makedirs(out_dir, exist_ok=True)
        iterator = images
        if show_progress:
            from tqdm import tqdm
            iterator = tqdm(images, desc=f'infer ({self.task})')
        predictions, skipped, stems = [], [], set()
        for path in iterator:
            img = read_image_rgb(path)
            if img is None:
                print_log(
                    f'infer: skipped {path}: cannot be read as an image',
                    logger='current',
                    level=30)
                skipped.append(dict(image=path, reason='cannot be read'))
                continue
            with torch.no_grad():
                sample = self.handler.predict(path)
            stem = osp.splitext(osp.basename(path))[0]
            if stem in stems:  # the same file name in two folders
                stem = f'{stem}_{len(predictions)}'
            stems.add(stem)
            out_stem = osp.join(out_dir or '', stem)
            record = dict(image=path, task=self.task)
            record.update(self.handler.to_dict(sample))
            if out_dir is not None:
                record.update(self.handler.write_files(sample, out_stem))
                self.handler.draw(img, sample, out_stem + '.png')
                record.update(png=out_stem + '.png', json=out_stem + '.json')
                with open(out_stem + '.json', 'w', encoding='utf-8') as f:
                    json.dump(record, f, indent=1)
            predictions.append(dict(record, data_sample=sample))
        return dict(predictions=predictions, skipped=skipped)
