"""Log what GAug learns: per-block mean variance and amplitude.

`Locality-Attending Vision Transformer <https://arxiv.org/abs/2603.04892>`_.
The statistics are gathered only on logging iterations, through temporary
forward hooks on the :class:`~mmlocat.models.layers.GaussianAugment`
modules, and synchronised with the host once per logging iteration.
"""
import re
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper

from mmlocat.models.layers.gaug import GaussianAugment
from mmlocat.registry import HOOKS

__all__ = ['GAugStatsHook']

_BLOCK_RE = re.compile(r'layers\.(\d+)\.')


@HOOKS.register_module()
class GAugStatsHook(Hook):
    """Every ``interval`` train iterations, log GAug's mean var and alpha.

    Writes ``gaug/var_block{i}`` and ``gaug/alpha_block{i}`` to the message
    hub (the logger hook prints them at the same interval). ``var`` is the
    variance actually used (after the grid rescale), averaged over batch,
    heads, patches and both axes; ``alpha`` is the Gaussian's amplitude.

    Args:
        interval: Logging interval in train iterations; use the logger's.
    """
    priority = 'NORMAL'  # before LoggerHook (BELOW_NORMAL) reads the hub

    def __init__(self, interval: int = 50) -> None:
        if interval < 1:
            raise ValueError(f'interval must be >= 1, got {interval}')
        self.interval = interval
        self._handles: list = []
        self._stats: Dict[str, List[torch.Tensor]] = {}

    @staticmethod
    def _gaug_modules(model) -> List[Tuple[str, GaussianAugment]]:
        if is_model_wrapper(model):
            model = model.module
        found = [(name, m) for name, m in model.named_modules()
                 if isinstance(m, GaussianAugment)]
        names = []
        for index, (name, _) in enumerate(found):
            match = _BLOCK_RE.search(name + '.')
            names.append(f'block{match.group(1) if match else index}')
        if len(set(names)) != len(names):  # several backbones: full names
            names = [name.replace('.', '_') for name, _ in found]
        return [(n, m) for n, (_, m) in zip(names, found)]

    def _make_hook(self, key: str):

        def hook(module: GaussianAugment, args: Sequence, output) -> None:
            q, hw = args[0], args[1]
            with torch.no_grad():
                var, alpha = module.variance_and_alpha(
                    q[:, :, module.num_prefix_tokens:].detach(), hw)
                self._stats.setdefault(key, []).append(
                    torch.stack((var.mean(), alpha.mean())))

        return hook

    def before_train_iter(self,
                          runner,
                          batch_idx: int,
                          data_batch: Optional[dict] = None) -> None:
        if not self.every_n_train_iters(runner, self.interval):
            return
        self._remove_handles()
        self._stats = {}
        for key, module in self._gaug_modules(runner.model):
            self._handles.append(
                module.register_forward_hook(self._make_hook(key)))

    def after_train_iter(self,
                         runner,
                         batch_idx: int,
                         data_batch: Optional[dict] = None,
                         outputs: Optional[dict] = None) -> None:
        if not self._handles:
            return
        self._remove_handles()
        if not self._stats:
            return
        keys = list(self._stats)
        # Average over the forwards of this iteration, then one host sync.
        values = torch.stack(
            [torch.stack(self._stats[k]).mean(0) for k in keys]).tolist()
        for key, (var, alpha) in zip(keys, values):
            runner.message_hub.update_scalar(f'gaug/var_{key}', var)
            runner.message_hub.update_scalar(f'gaug/alpha_{key}', alpha)
        self._stats = {}

    def _remove_handles(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def after_run(self, runner) -> None:
        self._remove_handles()
