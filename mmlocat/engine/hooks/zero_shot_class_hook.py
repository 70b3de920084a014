"""Check a zero-shot segmentor's text classes against the test dataset,
and the tower checkpoint loaded into it against its text embeddings.

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
    classes before evaluating, and its ``check_tower_checkpoint`` with a
    checkpoint loaded into it (``tools/test.py``'s, a host launcher's
    ``load_from``): the tower evaluated is that checkpoint's, not only the
    ``init_cfg``'s checked at build (:class:`mmlocat.ZeroShotSegmentor`).

    Raises:
        TypeError: The model has no ``check_classes`` /
            ``check_tower_checkpoint``.
        ValueError: From the model's checks: the classes differ, or the
            loaded tower is not proven to be the embeddings' CLIP.
    """
    priority = 'VERY_HIGH'

    @staticmethod
    def _model(runner, method: str):
        model = runner.model.module if is_model_wrapper(
            runner.model) else runner.model
        if not hasattr(model, method):
            raise TypeError(f'ZeroShotClassCheckHook needs a model with '
                            f'{method}, got {type(model).__name__}')
        return model

    def _check(self, runner, loader) -> None:
        self._model(runner, 'check_classes').check_classes(
            loader.dataset.metainfo['classes'])

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        # mmengine does not tell hooks the file; its load_from when set
        name = runner.cfg.get('load_from') or 'the loaded checkpoint'
        self._model(runner, 'check_tower_checkpoint').check_tower_checkpoint(
            name, loaded=checkpoint)

    def before_test(self, runner) -> None:
        self._check(runner, runner.test_dataloader)

    def before_val(self, runner) -> None:
        self._check(runner, runner.val_dataloader)
