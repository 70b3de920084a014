"""The eval-time finiteness check of the pooling / scoring layers.

Policy (the same as the backbones' input check): in training nothing is
checked -- a check is a host sync on every step, and a non-finite value
reaching the loss is what the AMP loss scaler (mmengine's
``AmpOptimWrapper``) skips a step for. In inference one check per call (one
host sync) raises an error that says *where* the value came from: already
in the layer's inputs, or arising inside the layer from finite inputs.
A backbone passes its own decision to its layers explicitly (see
``mmlocat.models.backbones.vit_checks.finite_checks_on``); ``None`` is for
a layer called on its own. Never while tracing or compiling (a check would
break the graph). Pure torch: no OpenMMLab import.
"""
from typing import Dict, Optional

import torch
from torch import Tensor

__all__ = ['should_check_finite', 'check_finite']


def should_check_finite(check_finite: Optional[bool]) -> bool:
    """``check_finite``, or for ``None`` whether autograd is off.

    Autograd off is the inference signal a stateless layer can see: the
    hosts' val / test loops run under :func:`torch.no_grad`. (A frozen
    backbone also runs under ``no_grad`` while a detector trains, which is
    why backbones decide for their layers and pass a bool.) Always False
    while tracing or compiling.
    """
    if torch.jit.is_tracing() or torch.compiler.is_compiling():
        return False
    if check_finite is None:
        return not torch.is_grad_enabled()
    return bool(check_finite)


def check_finite(layer: str, inputs: Dict[str, Tensor],
                 outputs: Dict[str, Tensor]) -> None:
    """Raise if any input or output holds NaN or inf (one host sync).

    Args:
        layer: The layer's name, for the message.
        inputs: Named input tensors.
        outputs: Named output tensors, computed from ``inputs``.

    Raises:
        ValueError: Naming the tensors, how many values are non-finite, and
            whether the inputs were already non-finite or the non-finite
            value arose inside the layer.
    """
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
