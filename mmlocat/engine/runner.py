"""The Runner a config names to get mmlocat's runtime
(:mod:`mmlocat.engine.runtime`)."""
import copy
import logging

from mmengine.config import Config
from mmengine.runner import Runner

from mmlocat.registry import RUNNERS
from mmlocat.utils.launch import check_component_arguments
from .data_guard import guard_runner_data
from .runtime import apply_runtime, setup_cpu_distributed

__all__ = ['MMLocatRunner']


@RUNNERS.register_module()
class MMLocatRunner(Runner):
    """mmengine's ``Runner`` with mmlocat's runtime.

    Declared by ``runner_type = 'mmlocat.MMLocatRunner'`` in a config (the
    line of ``configs/_base_/mmlocat_runtime.py``); every launcher that
    honours ``runner_type`` (mmlocat's and the hosts' ``tools/train.py`` /
    ``tools/test.py``) builds it. :meth:`from_cfg` completes the config with
    :func:`~mmlocat.engine.runtime.apply_runtime` (each addition is
    logged; the completed config is what the work dir and the checkpoints
    record), starts a gloo process group for ``--launcher pytorch`` on a
    machine without CUDA (:func:`~mmlocat.engine.runtime.
    setup_cpu_distributed`), checks the keywords of its hooks and loops
    (:func:`~mmlocat.utils.launch.check_component_arguments`) and wraps
    the datasets in :class:`mmlocat.CheckedDataset`.
    Nothing else differs from mmengine's Runner.
    """

    @classmethod
    def from_cfg(cls, cfg: Config) -> 'MMLocatRunner':
        cfg = copy.deepcopy(cfg)
        applied = apply_runtime(cfg)
        distributed = setup_cpu_distributed(cfg)
        if distributed is not None:
            applied.append((logging.INFO, distributed))
        # a misspelt hook / loop keyword fails now, not at its first use
        check_component_arguments(cfg)
        runner = super().from_cfg(cfg)
        for level, line in applied:
            runner.logger.log(level, f'mmlocat runtime: {line}')
        guard_runner_data(runner)
        return runner
