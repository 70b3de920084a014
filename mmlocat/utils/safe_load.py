"""Allow-list what mmengine writes into checkpoints for weights-only loads.

torch >= 2.6 loads checkpoints with ``weights_only=True`` by default, which
rejects the ``HistoryBuffer`` objects and numpy scalars that mmengine's
``MessageHub`` stores, so ``--resume`` and ``load_from`` fail. Rather than
switching the safety check off, the few types mmengine saves are registered
as safe globals.
"""
import numpy as np
import torch


def _numpy_safe_globals() -> list:
    """Numpy objects that pickle numpy scalars and arrays."""
    globals_ = [np.dtype, np.ndarray]
    for module_name in ('numpy._core.multiarray', 'numpy.core.multiarray'):
        try:
            module = __import__(module_name, fromlist=['scalar'])
        except ImportError:
            continue
        globals_ += [module.scalar, module._reconstruct]
        break
    # numpy >= 1.25 pickles dtypes as instances of per-type classes.
    dtypes = getattr(np, 'dtypes', None)
    if dtypes is not None:
        globals_ += [
            getattr(dtypes, name) for name in dir(dtypes)
            if name.endswith('DType')
        ]
    return globals_


def allow_mmengine_checkpoint_globals() -> None:
    """Register mmengine's checkpoint objects as torch safe globals."""
    add_safe_globals = getattr(torch.serialization, 'add_safe_globals', None)
    if add_safe_globals is None:  # torch < 2.4 has no weights-only default
        return
    from mmengine.logging import HistoryBuffer
    add_safe_globals([HistoryBuffer] + _numpy_safe_globals())
