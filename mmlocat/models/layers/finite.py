"""The one finiteness policy of mmlocat's models, and the error it raises.

Policy (:func:`finite_checks_on`): in training nothing is checked -- a
check is a host sync on every step, and a non-finite value reaching the
loss is what the AMP loss scaler (mmengine's ``AmpOptimWrapper``) skips a
step for. In inference one check per call (one host sync) raises an error
that says *where* the value came from (:func:`refuse_nonfinite`): already
in a layer's inputs, or arising inside the layer from finite inputs. Never
while tracing or compiling (a check would break the graph).

The mode is always passed explicitly: a module (backbone, neck, pooling)
decides with its own ``training`` flag, or with the ``check_finite``
argument its caller gives it (a detector that trains on a frozen backbone
kept in eval mode passes ``check_finite=False``); the pure functions
(:func:`~.lazy_strike.lazy_strike_pool`, :func:`~.patch_score.patch_score`)
take the decided bool. Pure torch: no OpenMMLab import.
"""
from typing import Dict, Optional

import torch
from torch import Tensor

__all__ = ['finite_checks_on', 'refuse_nonfinite']


def _tracing() -> bool:
    return torch.jit.is_tracing() or torch.compiler.is_compiling()


def finite_checks_on(check_finite: Optional[bool], training: bool) -> bool:
    """Whether to check for NaN / inf (one host sync): the one rule.

    Args:
        check_finite: The caller's decision; ``None`` leaves it to the mode.
        training: The mode of the module that checks (its ``training``).

    Returns:
        ``check_finite`` if it is a bool, else ``not training``; always
        False while tracing or compiling.
    """
    if _tracing():
        return False
    if check_finite is None:
        return not training
    return bool(check_finite)


def refuse_nonfinite(layer: str, inputs: Dict[str, Tensor],
                     outputs: Dict[str, Tensor]) -> None:
    """Raise if any input or output holds NaN or inf (one host sync).

    Does nothing while tracing or compiling.

    Args:
        layer: The layer's name, for the message.
        inputs: Named input tensors.
        outputs: Named output tensors, computed from ``inputs``.

    Raises:
        ValueError: Naming the tensors, how many values are non-finite, and
            whether the inputs were already non-finite or the non-finite
            value arose inside the layer.
    """
    if _tracing():
        return
    tensors = {**inputs, **outputs}
    counts = torch.stack([(~torch.isfinite(t.detach())).sum()
                          for t in tensors.values()]).tolist()
    bad = {
        name: (count, tensors[name].numel())
        for name, count in zip(tensors, counts) if count
    }
    if not bad:
        return
    found = ', '.join(f'{name} {count} of {total}'
                      for name, (count, total) in bad.items())
    if any(name in inputs for name in bad):
        raise ValueError(
            f'{layer} got NaN or inf in its inputs ({found} values '
            'non-finite): they were already non-finite when they reached '
            f'{layer}, i.e. produced upstream (the model\'s weights or '
            'activations, if the image batch was finite)')
    raise ValueError(
        f'{layer}: its inputs ({", ".join(inputs)}) were finite, but NaN '
        f'or inf arose inside {layer} ({found} values non-finite)')
