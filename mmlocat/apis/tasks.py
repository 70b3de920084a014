"""The inference tasks: an mmengine registry and its one selection rule.

A task is a :class:`~mmlocat.apis.inferencer.TaskHandler` subclass
registered in :data:`INFERENCE_TASKS`. It declares

* ``scope``: the ``default_scope`` of the configs it serves, and
* ``model_types``: the model types it serves (``cfg.model.type``, with or
  without the ``mmlocat.`` prefix); empty: every other model of ``scope``.

:func:`task_handler` picks, for a config, the handler that names the
config's model type; if none does, the handler of the config's scope that
names no model types. More than one candidate at either step, or none, is
an error that names the config, its model type and scope and the
registered tasks. So :class:`mmlocat.ZeroShotSegmentor` configs (mmseg
scope) get the zero-shot segmentation handler because it names that type,
whatever the registration order, and any other mmseg model gets the
segmentation handler. A new task registers the same way::

    from mmlocat.apis import INFERENCE_TASKS, TaskHandler

    @INFERENCE_TASKS.register_module()
    class DepthHandler(TaskHandler):
        task = 'depth'
        scope = 'mmseg'
        model_types = ('DepthEstimator', )
        ...
"""
from typing import List, Type

from mmengine.config import Config
from mmengine.registry import Registry

__all__ = ['INFERENCE_TASKS', 'task_handler', 'model_type']

#: Task handlers by class name (the built-in ones are registered by
#: :mod:`mmlocat.apis.inferencer`, imported on first use).
INFERENCE_TASKS = Registry(
    'inference task', scope='mmlocat', locations=['mmlocat.apis.inferencer'])


def model_type(cfg: Config) -> str:
    """``cfg.model.type`` without its registry-scope prefix ('' if none)."""
    model = cfg.get('model') or {}
    kind = model.get('type', '') if isinstance(model, dict) else ''
    if not isinstance(kind, str):  # a class given directly
        kind = getattr(kind, '__name__', str(kind))
    return kind.split('.')[-1]


def task_handler(cfg: Config) -> Type:
    """The one registered handler that serves ``cfg`` (see the module
    docstring for the rule).

    Raises:
        ValueError: If no handler or more than one serves ``cfg``.
    """
    INFERENCE_TASKS.import_from_location()
    handlers: List[Type] = list(INFERENCE_TASKS.module_dict.values())
    kind, scope = model_type(cfg), cfg.get('default_scope')
    chosen = [h for h in handlers if kind and kind in h.model_types]
    rule = f'name the model type {kind!r}'
    if not chosen:
        chosen = [
            h for h in handlers if not h.model_types and h.scope == scope
        ]
        rule = f'serve default_scope={scope!r} (any model type)'
    if len(chosen) == 1:
        return chosen[0]
    known = ', '.join(
        f'{h.__name__} ({h.task}: scope {h.scope!r}, model types '
        f'{list(h.model_types) or "any"})' for h in handlers)
    if not chosen:
        raise ValueError(
            f'{cfg.filename}: no inference task for model type {kind!r} '
            f'with default_scope={scope!r}; registered tasks: {known}')
    raise ValueError(
        f'{cfg.filename}: {len(chosen)} inference tasks '
        f'{[h.__name__ for h in chosen]} {rule}; exactly one may: '
        'unregister or narrow one of them')
