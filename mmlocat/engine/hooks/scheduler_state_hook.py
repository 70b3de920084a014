"""Parameter-scheduler states that torch's weights-only loading can read.

mmengine's ``OneCycleParamScheduler`` (``OneCycleLR``, the frozen probes'
schedule) keeps its annealing function in ``state_dict()``
(``anneal_func``, a static method). Pickled, that is
``getattr(OneCycleParamScheduler, '_annealing_cos')``, which torch's
weights-only unpickler (the default since torch 2.6) refuses, rightly:
allowing ``getattr`` would let a checkpoint reach any object. Every
checkpoint of such a run could then be neither resumed nor evaluated.

:class:`SchedulerStateHook` stores the function by name before a checkpoint
is written and puts it back after one is read (mmengine calls
``after_load_checkpoint`` before it restores the schedulers). Only the
functions of :data:`FUNCTIONS` are named; the state is otherwise unchanged.
"""
from typing import Callable, Dict, Iterator

from mmengine.hooks import Hook
from mmengine.optim.scheduler import OneCycleParamScheduler

from mmlocat.registry import HOOKS

__all__ = ['FUNCTIONS', 'SchedulerStateHook']

_TAG = 'mmlocat.function:'

#: Scheduler-state functions stored by name: ``'Class.method'`` -> function.
FUNCTIONS: Dict[str, Callable] = {
    f'OneCycleParamScheduler.{name}': getattr(OneCycleParamScheduler, name)
    for name in ('_annealing_cos', '_annealing_linear')
}
_NAMES = {func: name for name, func in FUNCTIONS.items()}


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
class SchedulerStateHook(Hook):
    """Name the functions in scheduler states so checkpoints load safely.

    ``tools/train.py`` adds it; with the hosts' tools add
    ``dict(type='mmlocat.SchedulerStateHook')`` to ``custom_hooks`` (the
    probe schedule does).
    """
    priority = 'VERY_LOW'

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        for state in _scheduler_states(checkpoint):
            for key, value in state.items():
                if callable(value) and value in _NAMES:
                    state[key] = _TAG + _NAMES[value]

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        for state in _scheduler_states(checkpoint):
            for key, value in state.items():
                if isinstance(value, str) and value.startswith(_TAG):
                    name = value[len(_TAG):]
                    if name not in FUNCTIONS:
                        raise ValueError(
                            f'the checkpoint names scheduler function '
                            f'{name!r} for {key!r}; known: '
                            f'{sorted(FUNCTIONS)}')
                    state[key] = FUNCTIONS[name]
