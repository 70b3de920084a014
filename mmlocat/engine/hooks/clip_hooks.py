"""Hooks of contrastive CLIP fine-tuning (:class:`mmlocat.CLIPContrastive`).

* :class:`LogitScaleClampHook`: open_clip's clamp of the logit scale to
  ``[0, log(100)]`` after every optimizer step
  (``open_clip_train/train.py``, https://github.com/mlfoundations/open_clip),
  and the scale the run starts from in the log.
The two towers' CLIP records go into every checkpoint's ``meta`` by
the runtime's :class:`mmlocat.RecordHook`.

A hook and not the forward or the optimizer wrapper: the clamp must act on
the parameter after the step (a clamp in the forward zeroes the scale's
gradient above the bound), ``after_train_iter`` follows the step of every
optimizer wrapper (AMP, gradient accumulation: the clamp is idempotent, so
clamping after an iteration without a step changes nothing) and of every
model wrapper (DDP / FSDP call the optimizer without the model's
``train_step``).
"""
import math
from typing import Optional, Sequence

from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.model import is_model_wrapper

from mmlocat.registry import HOOKS

__all__ = ['LogitScaleClampHook']


def _contrastive_model(runner, hook: str):
    model = runner.model.module if is_model_wrapper(
        runner.model) else runner.model
    for name in ('clamp_logit_scale', ):
        if not hasattr(model, name):
            raise TypeError(f'{hook} needs a CLIPContrastive model (with '
                            f'{name}), got {type(model).__name__}')
    return model


@HOOKS.register_module()
class LogitScaleClampHook(Hook):
    """Clamp ``logit_scale`` after every training iteration (open_clip);
    log the scale training starts from (iteration 0, or the resumed one).
    """
    priority = 'ABOVE_NORMAL'  # before the checkpoint hook saves

    def before_train(self, runner) -> None:
        model = _contrastive_model(runner, type(self).__name__)
        # a logged number, not a graph node (torch warns on a scalar of a
        # tensor that requires grad)
        value = float(model.logit_scale.detach())
        source = model.init_logit_scale
        if source == 'pretrained':
            source = f'pretrained, {model.text_encoder.weights}'
        if runner.iter > 0:
            source = 'resumed'
        print_log(
            f'logit scale at iteration {runner.iter}: '
            f'{math.exp(value):.4f} (logit_scale {value:.6f}, {source}); '
            f'clamped to [1, {model.max_logit_scale:g}] after each step',
            logger='current')

    def after_train_iter(self,
                         runner,
                         batch_idx: int,
                         data_batch: Optional[Sequence] = None,
                         outputs: Optional[dict] = None) -> None:
        _contrastive_model(runner, type(self).__name__).clamp_logit_scale()
