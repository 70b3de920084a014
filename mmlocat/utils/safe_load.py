"""Make mmengine's checkpoints loadable with torch's weights-only unpickler.

torch >= 2.6 loads checkpoints with ``weights_only=True`` by default, which
rejects what mmengine's ``MessageHub`` stores: ``HistoryBuffer`` objects
(numpy arrays and scalars inside), so ``--resume`` and ``load_from`` fail.
Rather than switching the safety check off, two things are done:

* the plain data types mmengine saves (``HistoryBuffer``, numpy arrays,
  scalars and dtypes, ``_codecs.encode`` used by numpy's pickles) are
  registered as safe globals;
* ``HistoryBuffer`` is pickled without its class-level table of statistic
  methods. mmengine stores bound references such as ``HistoryBuffer.mean``
  there, which pickle as ``getattr(HistoryBuffer, 'mean')``; allowing
  ``getattr`` would let a checkpoint reach arbitrary objects, i.e. disable
  the check. The table is rebuilt on load (the defaults are re-registered;
  custom methods are registered by the code that defines them anyway).
"""
import codecs

import numpy as np
import torch

__all__ = ['allow_mmengine_checkpoint_globals']


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


def _history_buffer_getstate(self) -> dict:
    state = dict(self.__dict__)
    state.pop('statistics_methods', None)
    return state


def _history_buffer_setstate(self, state: dict) -> None:
    state = dict(state)
    # checkpoints written without this module still carry the table
    methods = state.pop('statistics_methods', {})
    self.__dict__.update(state)
    self._set_default_statistics()
    for name, method in methods.items():
        self._statistics_methods.setdefault(name, method)


def allow_mmengine_checkpoint_globals() -> None:
    """Register mmengine's checkpoint types for weights-only loading."""
    from mmengine.logging import HistoryBuffer
    HistoryBuffer.__getstate__ = _history_buffer_getstate
    HistoryBuffer.__setstate__ = _history_buffer_setstate
    add_safe_globals = getattr(torch.serialization, 'add_safe_globals', None)
    if add_safe_globals is None:  # torch < 2.4 has no weights-only default
        return
    add_safe_globals([HistoryBuffer, codecs.encode] + _numpy_safe_globals())
