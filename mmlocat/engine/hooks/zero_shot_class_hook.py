"""Check a zero-shot segmentor's text classes against the test dataset.

A zero-shot segmentor's output channel ``k`` is the ``k``-th row of its
text-embedding file; mmseg's ``IoUMetric`` reads it as the dataset's label
``k``. Embeddings written for another class list, order or background
convention would be scored silently wrong, so this hook compares them with
the dataset's ``metainfo['classes']`` before the first batch.
"""
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper

from mmlocat.registry import HOOKS

__all__ = ['ZeroShotClassCheckHook']


@HOOKS.register_module()
class ZeroShotClassCheckHook(Hook):
    """Call the model's ``check_classes`` with the test / val dataset's
    classes before evaluating (:class:`mmlocat.ZeroShotSegmentor`).

    Raises:
        TypeError: The model has no ``check_classes``.
        ValueError: From ``check_classes``: the classes differ.
    """
    priority = 'VERY_HIGH'

    def _check(self, runner, loader) -> None:
        model = runner.model.module if is_model_wrapper(
            runner.model) else runner.model
        if not hasattr(model, 'check_classes'):
            raise TypeError(f'ZeroShotClassCheckHook needs a model with '
                            f'check_classes, got {type(model).__name__}')
        model.check_classes(loader.dataset.metainfo['classes'])

    def before_test(self, runner) -> None:
        self._check(runner, runner.test_dataloader)

    def before_val(self, runner) -> None:
        self._check(runner, runner.val_dataloader)
