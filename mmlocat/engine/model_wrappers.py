"""Distributed data parallel on CPU-only machines (gloo)."""
from mmengine.model import MMDistributedDataParallel, revert_sync_batchnorm
from torch import nn

from mmlocat.registry import MODEL_WRAPPERS

__all__ = ['CPUDistributedDataParallel']


@MODEL_WRAPPERS.register_module()
class CPUDistributedDataParallel(MMDistributedDataParallel):
    """``MMDistributedDataParallel`` for CPU processes.

    ``SyncBatchNorm`` only runs on accelerators, and the hosts' configs use
    it by default (mmseg's ``norm_cfg``), so it is reverted to plain batch
    norm before wrapping. ``device_ids`` must be ``None`` for CPU modules.
    """

    def __init__(self, module: nn.Module, **kwargs) -> None:
        kwargs['device_ids'] = None
        super().__init__(module=revert_sync_batchnorm(module), **kwargs)
