"""Training checkpoints that torch's weights-only loading reads.

Two things in mmengine's checkpoints are refused by torch's weights-only
unpickler (the default since torch 2.6), rightly, since allowing ``getattr``
would let a checkpoint reach any object:

* ``HistoryBuffer`` (the message hub's scalars) pickles its class-level
  table of statistic methods as ``getattr(HistoryBuffer, 'mean')``, ...;
* ``OneCycleParamScheduler`` (``OneCycleLR``, the frozen probes' schedule)
  keeps its annealing function (a static method) in ``state_dict()``.

:class:`WeightsOnlyCheckpointHook` writes the buffers as plain data
(:func:`~mmlocat.utils.safe_load.history_buffer_for_saving`) and the
schedulers' functions by name before a checkpoint is saved, and puts both
back after one is read (mmengine calls ``after_load_checkpoint`` before it
restores the message hub and the schedulers): its checkpoints need no
allow-listing, so a host's own ``tools/test.py`` (mmseg's builds a plain
``Runner``) reads them. While the runner runs it allows the
plain data types of mmengine's checkpoints
(:func:`~mmlocat.utils.safe_load.mmengine_checkpoint_globals`) for
``load_from`` / ``--resume``; nothing is registered outside a run.
"""
import contextlib
from typing import Callable, Dict, Iterator, Optional

import numpy as np
from mmengine.hooks import Hook
from mmengine.logging import HistoryBuffer
from mmengine.optim.scheduler import OneCycleParamScheduler

from mmlocat.registry import HOOKS
from mmlocat.utils.safe_load import (history_buffer_for_saving,
                                     history_buffer_from_saved,
                                     mmengine_checkpoint_globals)

__all__ = ['SCHEDULER_FUNCTIONS', 'WeightsOnlyCheckpointHook']

_TAG = 'mmlocat.function:'

#: Scheduler-state functions stored by name: ``'Class.method'`` -> function.
SCHEDULER_FUNCTIONS: Dict[str, Callable] = {
    f'OneCycleParamScheduler.{name}': getattr(OneCycleParamScheduler, name)
    for name in ('_annealing_cos', '_annealing_linear')
}
_NAMES = {func: name for name, func in SCHEDULER_FUNCTIONS.items()}


def _scheduler_states(checkpoint: dict) -> Iterator[dict]:
    """Every scheduler state dict of an mmengine checkpoint (a list, or a
    dict of lists for several optimizers)."""
    schedulers = checkpoint.get('param_schedulers')
    if isinstance(schedulers, dict):
        groups = list(schedulers.values())
    else:
        groups = [schedulers or []]
    for group in groups:
        for state in group:
            if isinstance(state, dict):
                yield state


@HOOKS.register_module()
class WeightsOnlyCheckpointHook(Hook):
    """Save checkpoints that weights-only loading reads; read them in runs.

    mmlocat's runtime (``runner_type = 'mmlocat.MMLocatRunner'``) adds it,
    under any launcher; a config may also name it in ``custom_hooks``.
    """
    priority = 'VERY_LOW'

    def __init__(self) -> None:
        self._globals: Optional[contextlib.ExitStack] = None

    # -- the run: allow mmengine's data types for its loads ------------

    def before_run(self, runner) -> None:
        if self._globals is None:
            self._globals = contextlib.ExitStack()
            self._globals.enter_context(mmengine_checkpoint_globals())

    def after_run(self, runner) -> None:
        if self._globals is not None:
            self._globals.close()
            self._globals = None

    # -- writing and reading checkpoints --------------------------------

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        hub = checkpoint.get('message_hub')
        if isinstance(hub, dict) and isinstance(hub.get('log_scalars'), dict):
            # a new dict: the runner's own buffers stay as they are
            checkpoint['message_hub'] = dict(
                hub,
                log_scalars={
                    key:
                    history_buffer_for_saving(value) if isinstance(
                        value, HistoryBuffer) else value
                    for key, value in hub['log_scalars'].items()
                })
            info = hub.get('runtime_info')
            if isinstance(info, dict):  # e.g. the logger's numpy 'eta'
                checkpoint['message_hub']['runtime_info'] = {
                    key:
                    value.item() if isinstance(value, np.generic) else value
                    for key, value in info.items()
                }
        for state in _scheduler_states(checkpoint):
            for key, value in state.items():
                if callable(value) and value in _NAMES:
                    state[key] = _TAG + _NAMES[value]

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        hub = checkpoint.get('message_hub')
        if isinstance(hub, dict) and isinstance(hub.get('log_scalars'), dict):
            hub['log_scalars'] = {
                key: history_buffer_from_saved(value)
                for key, value in hub['log_scalars'].items()
            }
        for state in _scheduler_states(checkpoint):
            for key, value in state.items():
                if isinstance(value, str) and value.startswith(_TAG):
                    name = value[len(_TAG):]
                    if name not in SCHEDULER_FUNCTIONS:
                        raise ValueError(
                            f'the checkpoint names scheduler function '
                            f'{name!r} for {key!r}; known: '
                            f'{sorted(SCHEDULER_FUNCTIONS)}')
                    state[key] = SCHEDULER_FUNCTIONS[name]
