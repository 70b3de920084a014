"""One line instead of mmengine's per-tensor initialisation report.

mmengine's ``BaseModule.init_weights`` ends, on the top-level module, with
``_dump_init_info``: with a ``FileHandler`` on the current logger (a
Runner's log file) it writes one entry per parameter tensor into that file;
without one (a tool that builds a model outside a Runner:
``dump_text_embeddings.py``, ``infer.py --classes``, the demo) it logs
every entry at INFO on the console, two lines a tensor ("The value is the
same before and after calling `init_weights` of OpenCLIPTextTower" for
weights loaded by the module itself), hundreds of lines for one text
tower. :class:`SummarisedInitInfo` keeps the file entries and replaces the
console flood by one line that counts them.
"""
import logging
from typing import Dict

from mmengine.dist import master_only
from mmengine.logging import MMLogger, print_log

__all__ = ['SummarisedInitInfo', 'init_info_summary']

_SAME = 'The value is the same before and after'


def init_info_summary(name: str, infos: Dict) -> str:
    """The one line for ``name``'s ``_params_init_info`` values."""
    same = sum(1 for info in infos if info.startswith(_SAME))
    return (f'{name}.init_weights: {len(infos)} parameter tensors, '
            f'{len(infos) - same} set by an initialiser, {same} left as '
            'built or loaded (the per-tensor list goes to a run\'s log '
            'file)')


class SummarisedInitInfo:
    """Mixin for an mmengine ``BaseModule`` that may be the top-level
    module: its initialisation report is one console line when no log file
    takes the per-tensor entries (mmengine's report otherwise)."""

    @master_only
    def _dump_init_info(self) -> None:
        logger = MMLogger.get_current_instance()
        if any(isinstance(h, logging.FileHandler) for h in logger.handlers):
            return super()._dump_init_info()
        infos = [
            self._params_init_info[param]['init_info']
            for _, param in self.named_parameters()
        ]
        print_log(
            init_info_summary(type(self).__name__, infos), logger='current')
