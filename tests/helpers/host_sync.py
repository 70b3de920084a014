"""A dispatch mode that records the ops that sync the host, for tests of
code that must not sync (the training forward)."""
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ['SYNC_OPS', 'HostSyncCounter']

# Ops that copy a value to the host (item / bool / float / `if tensor`) or
# whose output shape depends on the data (a sync on CUDA).
SYNC_OPS = ('_local_scalar_dense', 'nonzero', 'masked_select', 'unique',
            'repeat_interleave.Tensor', 'equal', 'allclose')


class HostSyncCounter(TorchDispatchMode):
    """Records (in ``syncs``) every dispatched op that syncs the host."""

    def __init__(self):
        super().__init__()
        self.syncs = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func)
        if any(op in name for op in SYNC_OPS):
            self.syncs.append(name)
        return func(*args, **(kwargs or {}))
