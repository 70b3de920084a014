"""Read mmengine's checkpoints under torch's weights-only loading, scoped.

torch >= 2.6 loads with ``weights_only=True`` by default, which refuses
the objects mmengine's ``MessageHub`` keeps in every training checkpoint:
``HistoryBuffer`` objects with numpy arrays and scalars inside. Rather than
switching the check off, or registering types for the whole process when
mmlocat is imported, two narrow things are provided:

* :func:`mmengine_checkpoint_globals`: a context manager allowing exactly
  those plain data types (``HistoryBuffer``, numpy arrays, scalars and
  dtypes, ``_codecs.encode`` used by numpy's pickles) for the loads inside
  it, and removing again what it added;
* :func:`history_buffer_for_saving`: a stand-in that pickles a
  ``HistoryBuffer`` without its class-level table of statistic methods.
  mmengine's own ``__getstate__`` stores bound references such as
  ``HistoryBuffer.mean`` there, pickled as ``getattr(HistoryBuffer,
  'mean')``; allowing ``getattr`` would let a checkpoint reach arbitrary
  objects, i.e. disable the check. The file then holds a plain
  ``HistoryBuffer`` (mmengine's ``__setstate__`` rebuilds the table).

:class:`mmlocat.engine.WeightsOnlyCheckpointHook` applies both to a
Runner; mmengine's classes are not modified.
"""
import codecs
import contextlib
from typing import Iterator, List, Sequence

import numpy as np
import torch

__all__ = [
    'mmengine_checkpoint_safe_globals', 'mmengine_checkpoint_globals',
    'history_buffer_for_saving'
]


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


def mmengine_checkpoint_safe_globals() -> List[object]:
    """The types mmengine's training checkpoints hold besides tensors."""
    from mmengine.logging import HistoryBuffer
    return [HistoryBuffer, codecs.encode] + _numpy_safe_globals()


@contextlib.contextmanager
def mmengine_checkpoint_globals(extra: Sequence = ()) -> Iterator[None]:
    """Allow :func:`mmengine_checkpoint_safe_globals` (and ``extra``) for
    the loads inside.

    Only the types not already allowed are added, and only those are
    removed on exit (torch's own ``safe_globals`` removes all it was given),
    so nesting this, or a user's own registration, is safe.
    """
    allowed = set(torch.serialization.get_safe_globals())
    missing = []
    for g in mmengine_checkpoint_safe_globals() + list(extra):
        if g not in allowed and g not in missing:
            missing.append(g)
    with torch.serialization.safe_globals(missing):
        yield


class _HistoryBufferState:
    """Pickles as ``HistoryBuffer()`` + its data, without the method table
    (see the module docstring)."""

    def __init__(self, buffer) -> None:
        self.buffer = buffer

    def __reduce__(self):
        state = dict(self.buffer.__dict__)
        # mmengine's __getstate__ leaves its table on the live object
        state.pop('statistics_methods', None)
        return type(self.buffer), (), state


def history_buffer_for_saving(buffer) -> object:
    """What to put in a checkpoint in place of the ``HistoryBuffer``."""
    return _HistoryBufferState(buffer)
