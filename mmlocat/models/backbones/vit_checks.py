"""Argument, input and loading checks shared by mmlocat's ViT backbones.

One place for the policies every backbone (LocAtViT, LaStViT, CLIPViT,
EVA02CLIPViT) follows:

* ``out_indices``: validated like mmpretrain's ``VisionTransformer``
  (ints in ``[-L, L)``, negatives counted from the end; the errors are also
  ``AssertionError`` with the host's wording, so code written against the
  host keeps working), and additionally refused when duplicated or
  unsorted, because outputs come in block order; nothing is reordered
  silently.
* ``frozen_stages``: ``-1`` / ``0`` (nothing) up to ``L`` (every block).
* input batches: ``(B, C, H, W)`` with ``B > 0`` always; in inference
  also finite (one ``torch.isfinite(x).all()`` at the backbone input; the
  policy is :func:`mmlocat.models.layers.finite.finite_checks_on`).
  Training does no check and no host sync: a non-finite batch reaches the
  loss, where mmengine's ``AmpOptimWrapper`` (dynamic loss scale) skips the
  step and lowers the scale.
* ``init_cfg=dict(type='Pretrained', ...)``: strict loading through
  :func:`mmlocat.utils.pretrained.load_pretrained`; the checkpoint parts a
  configuration does not build (:meth:`StrictPretrainedMixin.
  expected_unused_keys`) are left out with one log line.
"""
from typing import Dict, List, Optional, Sequence, Union

import torch
from mmengine.logging import MMLogger

from mmlocat.utils.pretrained import is_pretrained_cfg, load_pretrained

__all__ = [
    'arch_num_layers', 'validate_out_indices', 'validate_frozen_stages',
    'check_arch_args', 'HostTypeError', 'HostValueError', 'check_input_batch',
    'StrictPretrainedMixin'
]


class HostTypeError(TypeError, AssertionError):
    """A ``TypeError`` that mmpretrain's ``VisionTransformer`` raises as an
    ``AssertionError``; both ``except`` clauses catch it."""


class HostValueError(ValueError, AssertionError):
    """A ``ValueError`` that the host raises as an ``AssertionError``."""


def arch_num_layers(arch_zoo: dict, arch: Union[str, dict]) -> Optional[int]:
    """Blocks of ``arch`` (an alias of ``arch_zoo`` or a dict), if known.

    ``None`` lets the host's own arch check raise its error.
    """
    if isinstance(arch, str):
        arch = arch_zoo.get(arch.lower())
    if isinstance(arch, dict) and isinstance(arch.get('num_layers'), int):
        return arch['num_layers']
    return None


def validate_out_indices(out_indices: Union[int, Sequence[int]],
                         num_layers: int) -> List[int]:
    """Normalise ``out_indices`` to sorted, unique, non-negative block ids.

    Args:
        out_indices: One index or a sequence; ``-1`` is the last block.
        num_layers: Number of blocks ``L``.

    Returns:
        The indices as a list in ``[0, L)``.

    Raises:
        TypeError: If an index is not an int.
        ValueError: If an index is out of ``[-L, L)``, the list is empty, an
            index repeats or the order is not increasing.
    """
    if isinstance(out_indices, int):
        out_indices = [out_indices]
    if not isinstance(out_indices, Sequence) or isinstance(out_indices, str):
        raise HostTypeError(
            'out_indices must be an int or a sequence of ints, got '
            f'{type(out_indices).__name__} ("out_indices" must by a '
            f'sequence or int, get {type(out_indices)} instead.)')
    if len(out_indices) == 0:
        raise ValueError('out_indices is empty: name at least one block')
    result = []
    for index in out_indices:
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f'out_indices must hold ints, got {index!r} in '
                            f'{tuple(out_indices)}')
        if not -num_layers <= index < num_layers:
            raise HostValueError(
                f'Invalid out_indices {index}: out_indices '
                f'{tuple(out_indices)}: {index} is out of range for '
                f'{num_layers} blocks (valid: {-num_layers} to '
                f'{num_layers - 1})')
        result.append(index % num_layers)
    if len(set(result)) != len(result):
        raise ValueError(f'out_indices {tuple(out_indices)} name a block '
                         f'twice (as blocks {tuple(result)})')
    if result != sorted(result):
        raise ValueError(
            f'out_indices {tuple(out_indices)} are not in increasing block '
            f'order (as blocks {tuple(result)}); outputs come in block '
            f'order, write {tuple(sorted(result))}')
    return result


def validate_frozen_stages(frozen_stages: int, num_layers: int) -> int:
    """``frozen_stages`` must be ``-1`` (or 0: nothing) to ``num_layers``."""
    if isinstance(frozen_stages, bool) or not isinstance(frozen_stages, int):
        raise TypeError(f'frozen_stages must be an int, got {frozen_stages!r}')
    if not -1 <= frozen_stages <= num_layers:
        raise ValueError(
            f'frozen_stages={frozen_stages} is out of range for '
            f'{num_layers} blocks: use -1 (none) to {num_layers} (all)')
    return frozen_stages


def check_arch_args(arch_zoo: dict, arch: Union[str, dict],
                    out_indices: Union[int, Sequence[int]],
                    frozen_stages: int) -> List[int]:
    """``out_indices`` (validated, as a new list) and ``frozen_stages``
    checked against the blocks of ``arch``.

    An unknown ``arch`` is left to the host's own arch check; the indices
    then only become a list (the host rewrites negatives in place).
    """
    num_layers = arch_num_layers(arch_zoo, arch)
    if num_layers is None:
        if isinstance(out_indices, int):
            return [out_indices]
        return list(out_indices) if isinstance(out_indices,
                                               (list, tuple)) else out_indices
    out_indices = validate_out_indices(out_indices, num_layers)
    validate_frozen_stages(frozen_stages, num_layers)
    return out_indices


def check_input_batch(x: torch.Tensor,
                      check_finite: bool,
                      name: str = 'backbone') -> None:
    """Refuse a batch the backbone cannot process meaningfully.

    Shape checks are free (no host sync); the finiteness check runs only
    when ``check_finite`` (decided by
    :func:`mmlocat.models.layers.finite.finite_checks_on`).

    Args:
        x: Input images ``(B, C, H, W)``.
        check_finite: Check for NaN / inf values (one host sync).
        name: Backbone name for messages.

    Raises:
        ValueError: On a non-4-D input, an empty batch or (checked) NaN / inf
            values; the message names the batch shape and the count.
    """
    if x.dim() != 4:
        raise ValueError(f'{name} expects images (B, C, H, W), got a '
                         f'{x.dim()}-D input of shape {tuple(x.shape)}')
    if 0 in x.shape:
        raise ValueError(f'{name} got an empty batch of shape '
                         f'{tuple(x.shape)}: every dimension must be > 0')
    if not check_finite or not x.is_floating_point():
        return
    if not bool(torch.isfinite(x).all()):
        count = int((~torch.isfinite(x)).sum())
        raise ValueError(
            f'{name} got non-finite input: {count} NaN/inf value(s) in the '
            f'batch of shape {tuple(x.shape)} (check the data / '
            'preprocessing; the network was not run)')


class StrictPretrainedMixin:
    """``init_weights`` with strict ``Pretrained`` loading.

    Put it before mmpretrain's ``VisionTransformer`` in the bases. A
    ``Pretrained`` ``init_cfg`` first runs the random initialisation (so
    allowed-new keys get their proper init), then
    :func:`~mmlocat.utils.pretrained.load_pretrained`. ``NEW_KEY_GROUPS``
    lists the key substrings of parameters the backbone adds to a plain
    ViT (allowed to be missing only all together);
    :meth:`expected_unused_keys` names the parts of a checkpoint's network
    this configuration does not build (allowed to be left over).
    """
    NEW_KEY_GROUPS: Sequence[str] = ()

    def expected_unused_keys(self) -> Dict[str, str]:
        """Top-level parameters / modules of a full ViT checkpoint that this
        configuration does not build, mapped to why.

        Their checkpoint keys are expected leftovers: the final norm
        ``ln1`` with ``final_norm=False`` (dense heads read the blocks'
        outputs) and the GAP norm ``ln2`` (timm's ``fc_norm``) unless
        ``out_type='avg_featmap'``. Subclasses add their own optional
        parts (a projection, a CLS token).
        """
        unused = {}
        if not self.final_norm:
            unused['ln1'] = 'final_norm=False builds no final norm'
        if 'ln2' not in self._modules:
            unused['ln2'] = (f'out_type={self.out_type!r} builds no GAP norm '
                             "(only 'avg_featmap' does)")
        return unused

    def init_weights(self) -> None:
        cfg = self.init_cfg
        if not is_pretrained_cfg(cfg):
            super().init_weights()
            return
        self.init_cfg = None
        try:
            super().init_weights()
        finally:
            self.init_cfg = cfg
        load_pretrained(
            self,
            cfg,
            new_key_groups=self.NEW_KEY_GROUPS,
            logger=MMLogger.get_current_instance(),
            expected_unused=self.expected_unused_keys())
