"""mmengine's default optimizer constructor, its per-parameter log lines
summarised.

With a ``paramwise_cfg``, mmengine's ``DefaultOptimWrapperConstructor``
(``add_params``) logs one WARNING per frozen parameter ("... is skipped
since its requires_grad=False": 149 for a LaSt-CLIP run with a locked
text tower) and one INFO line per parameter and option
("paramwise_options -- name:key=value"). This constructor builds the same
optimizer and logs what those lines said in two lines.
"""
import logging
from collections import Counter
from typing import List

import torch.nn as nn
from mmengine.logging import MMLogger, print_log
from mmengine.optim import DefaultOptimWrapperConstructor, OptimWrapper

from mmlocat.registry import OPTIM_WRAPPER_CONSTRUCTORS

__all__ = ['SummarisedOptimWrapperConstructor', 'ParamLogSummary']

_FROZEN = 'is skipped since its requires_grad=False'
_OPTION = 'paramwise_options -- '


class ParamLogSummary(logging.Filter):
    """A logging filter that takes the constructor's per-parameter records
    and counts them (``frozen``: names; ``options``: ``key=value`` ->
    count)."""

    def __init__(self) -> None:
        super().__init__()
        self.frozen: List[str] = []
        self.options: Counter = Counter()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message.endswith(_FROZEN):
            self.frozen.append(message[:-len(_FROZEN)].strip())
            return False
        if message.startswith(_OPTION):
            self.options[message.rsplit(':', 1)[-1]] += 1
            return False
        return True

    def lines(self) -> List[str]:
        """The summary lines (none when nothing was taken)."""
        out = []
        if self.frozen:
            tops = Counter(name.split('.')[0] for name in self.frozen)
            where = ', '.join(f'{k} {n}' for k, n in sorted(tops.items()))
            out.append(f'optimizer: {len(self.frozen)} frozen parameters '
                       f'(requires_grad=False) left out ({where}), e.g. '
                       f'{self.frozen[0]}')
        if self.options:
            opts = ', '.join(f'{k} x{n}'
                             for k, n in sorted(self.options.items()))
            out.append(f'optimizer: paramwise options set: {opts}')
        return out


@OPTIM_WRAPPER_CONSTRUCTORS.register_module()
class SummarisedOptimWrapperConstructor(DefaultOptimWrapperConstructor):
    """mmengine's ``DefaultOptimWrapperConstructor`` whose per-parameter
    log lines are summarised (:class:`ParamLogSummary`); the optimizer is
    the same.

    Example:
        >>> optim_wrapper = dict(
        ...     optimizer=dict(type='AdamW', lr=1e-5, weight_decay=0.2),
        ...     constructor='mmlocat.SummarisedOptimWrapperConstructor',
        ...     paramwise_cfg=dict(norm_decay_mult=0.0))
    """

    def __call__(self, model: nn.Module) -> OptimWrapper:
        logger = MMLogger.get_current_instance()
        summary = ParamLogSummary()
        logger.addFilter(summary)
        try:
            wrapper = super().__call__(model)
        finally:
            logger.removeFilter(summary)
        for line in summary.lines():
            print_log(line, logger='current')
        return wrapper
