"""mmlocat.apis.tasks: the inference-task registry and its selection rule.
"""
import os.path as osp

import pytest
from mmengine.config import Config
from mmengine.registry import Registry

from mmlocat.apis import INFERENCE_TASKS, TaskHandler, task_handler
from mmlocat.apis.inferencer import (ClassificationHandler, DetectionHandler,
                                     SegmentationHandler,
                                     ZeroShotSegmentationHandler)


@pytest.mark.parametrize('config,handler', [
    ('configs/locat/locat-t_8xb128_in1k.py', ClassificationHandler),
    ('configs/locat/upernet_locat-b_ade20k.py', SegmentationHandler),
    ('configs/ovd/fvit_clip-b16_ov-coco.py', DetectionHandler),
    ('configs/last/zeroshot_clip-b16_voc20.py', ZeroShotSegmentationHandler),
])
def test_shipped_configs_get_their_task(config, handler, repo_root):
    cfg = Config.fromfile(osp.join(repo_root, config))
    assert task_handler(cfg) is handler


def test_registry_holds_the_four_tasks():
    assert isinstance(INFERENCE_TASKS, Registry)
    INFERENCE_TASKS.import_from_location()
    assert {
        name: handler.task
        for name, handler in INFERENCE_TASKS.module_dict.items()
    } == {
        'ClassificationHandler': 'classification',
        'SegmentationHandler': 'segmentation',
        'DetectionHandler': 'detection',
        'ZeroShotSegmentationHandler': 'zero-shot segmentation',
    }


def test_model_type_with_or_without_scope_prefix():
    for kind in ('mmlocat.ZeroShotSegmentor', 'ZeroShotSegmentor'):
        cfg = Config(dict(default_scope='mmseg', model=dict(type=kind)))
        assert task_handler(cfg) is ZeroShotSegmentationHandler
    cfg = Config(
        dict(default_scope='mmseg', model=dict(type='EncoderDecoder')))
    assert task_handler(cfg) is SegmentationHandler


def test_unknown_model_is_refused():
    cfg = Config(
        dict(default_scope='mmaction', model=dict(type='Recognizer3D')))
    with pytest.raises(ValueError) as err:
        task_handler(cfg)
    message = str(err.value)
    assert ("no inference task for model type 'Recognizer3D' with "
            "default_scope='mmaction'") in message
    # the known tasks are listed
    for name in ('ClassificationHandler', 'ZeroShotSegmentationHandler'):
        assert name in message


@pytest.fixture
def registered():
    """Register handlers for one test, then remove them."""
    added = []

    def register(handler):
        INFERENCE_TASKS.register_module(module=handler)
        added.append(handler.__name__)
        return handler

    yield register
    for name in added:
        INFERENCE_TASKS._module_dict.pop(name)


def test_ambiguity_is_an_error(registered):

    class OtherZeroShot(TaskHandler):
        task = 'other zero-shot'
        scope = 'mmseg'
        model_types = ('ZeroShotSegmentor', )

    class OtherSeg(TaskHandler):
        task = 'other segmentation'
        scope = 'mmseg'

    registered(OtherZeroShot)
    cfg = Config(
        dict(default_scope='mmseg', model=dict(type='ZeroShotSegmentor')))
    with pytest.raises(
            ValueError,
            match=r"2 inference tasks .*"
            r"'ZeroShotSegmentationHandler', 'OtherZeroShot'.* "
            "name the model type 'ZeroShotSegmentor'"):
        task_handler(cfg)
    registered(OtherSeg)
    cfg = Config(dict(default_scope='mmseg', model=dict(type='X')))
    with pytest.raises(ValueError, match="serve default_scope='mmseg'"):
        task_handler(cfg)


def test_a_new_task_by_its_model_type(registered):
    """A registered handler naming a model type serves it, whatever the
    registration order (no priority list)."""

    class Depth(SegmentationHandler):
        task = 'depth'
        model_types = ('DepthEstimator', )

    registered(Depth)
    cfg = Config(
        dict(default_scope='mmseg', model=dict(type='DepthEstimator')))
    assert task_handler(cfg) is Depth
    cfg = Config(
        dict(default_scope='mmseg', model=dict(type='EncoderDecoder')))
    assert task_handler(cfg) is SegmentationHandler
