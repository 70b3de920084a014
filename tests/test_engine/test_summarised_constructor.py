"""mmlocat.SummarisedOptimWrapperConstructor: mmengine's default optimizer,
its per-parameter log lines (one per frozen parameter, one per paramwise
option) summarised in two lines."""
import logging

import torch.nn as nn
from mmengine.logging import MMLogger
from mmengine.optim import DefaultOptimWrapperConstructor

from mmlocat.engine.optimizers import SummarisedOptimWrapperConstructor
from mmlocat.registry import OPTIM_WRAPPER_CONSTRUCTORS

CFG = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.1))
PARAMWISE = dict(norm_decay_mult=0.0, custom_keys={'2.': dict(lr_mult=2)})


class _Records(logging.Handler):

    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def _model():
    model = nn.Sequential(
        nn.Sequential(*[nn.Linear(4, 4) for _ in range(5)]), nn.LayerNorm(4),
        nn.Linear(4, 2))
    for p in model[0].parameters():
        p.requires_grad = False  # a locked tower: 10 frozen tensors
    return model


def _build(constructor_cls, model):
    logger = MMLogger.get_instance('summarised_constructor_test')
    records = _Records()
    logger.addHandler(records)
    try:
        wrapper = constructor_cls(dict(CFG), dict(PARAMWISE))(model)
    finally:
        logger.removeHandler(records)
    return wrapper, records.messages


def test_same_optimizer_two_lines():
    model = _model()
    ours, lines = _build(SummarisedOptimWrapperConstructor, model)
    theirs, host_lines = _build(DefaultOptimWrapperConstructor, model)
    # the host's flood, which the summary replaces
    assert sum('requires_grad=False' in m for m in host_lines) == 10
    assert len(host_lines) > 10
    assert not any('requires_grad=False' in m
                   for m in lines if not m.startswith('optimizer:'))
    assert not any(m.startswith('paramwise_options') for m in lines)
    assert [m for m in lines if m.startswith('optimizer:')] == [
        'optimizer: 10 frozen parameters (requires_grad=False) left out '
        '(0 10), e.g. 0.0.weight',
        'optimizer: paramwise options set: lr=0.002 x2, lr_mult=2 x2, '
        'weight_decay=0.0 x2, weight_decay=0.1 x2'
    ], lines

    def groups(w):
        return [(tuple(id(p) for p in g['params']), g['lr'], g['weight_decay'])
                for g in w.optimizer.param_groups]

    assert groups(ours) == groups(theirs)


def test_registered_and_other_records_pass():
    assert OPTIM_WRAPPER_CONSTRUCTORS.get(
        'SummarisedOptimWrapperConstructor') is (
            SummarisedOptimWrapperConstructor)
    model = nn.Linear(2, 2)  # nothing frozen, no option: nothing to say
    _, lines = _build(SummarisedOptimWrapperConstructor, model)
    assert not [m for m in lines if m.startswith('optimizer:')]
    assert any('AdamW' in m for m in lines)  # other records pass
