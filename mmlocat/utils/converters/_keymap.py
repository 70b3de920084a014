"""Key renaming shared by the checkpoint converters.

A converter is a table of module renames plus a per-block table; every key
of the source must be covered, so no weight is dropped silently.
"""
import re
from collections import OrderedDict
from typing import Dict, Iterable, Mapping, Optional

from torch import Tensor

from ..checkpoint_io import strip_prefix

__all__ = ['rename_keys', 'require_keys', 'visual_keys']

StateDict = Dict[str, Tensor]


def _rename(name: str, table: Mapping[str, str]) -> Optional[str]:
    """Rename ``name`` by the first entry that equals it or is its module."""
    for src, dst in table.items():
        if name == src:
            return dst
        if name.startswith(src + '.'):
            return dst + name[len(src):]
    return None


def visual_keys(state_dict: Mapping[str, Tensor]) -> StateDict:
    """A CLIP checkpoint's image-tower keys, without ``module.`` and
    (when there are ``visual.*`` keys: a full CLIP) ``visual.``."""
    state_dict = strip_prefix(state_dict, ['module.'])
    if any(k.startswith('visual.') for k in state_dict):
        state_dict = OrderedDict((k[len('visual.'):], v)
                                 for k, v in state_dict.items()
                                 if k.startswith('visual.'))
    return state_dict


def rename_keys(state_dict: Mapping[str, Tensor],
                top: Mapping[str, str],
                block_pattern: str,
                block: Mapping[str, str],
                block_target: str,
                source: str,
                skip: Iterable[str] = ()) -> StateDict:
    """Rename every key of ``state_dict`` or raise.

    Args:
        state_dict: Source tensors.
        top: Renames outside the blocks (module prefix or exact key).
        block_pattern: Regex with groups (block index, rest of the key).
        block: Renames of the rest of a block key.
        block_target: Format string with ``{i}`` and ``{name}``.
        source: Format name used in error messages.
        skip: Key prefixes that are dropped on purpose.

    Raises:
        ValueError: If a key is not covered by the tables.
    """
    pattern = re.compile(block_pattern)
    skip = tuple(skip)
    out = OrderedDict()
    unknown = []
    for key, value in state_dict.items():
        if skip and key.startswith(skip):
            continue
        new = _rename(key, top)
        if new is None:
            match = pattern.match(key)
            if match is not None:
                name = _rename(match.group(2), block)
                if name is not None:
                    new = block_target.format(i=int(match.group(1)), name=name)
        if new is None:
            unknown.append(key)
        else:
            out[new] = value
    if unknown:
        raise ValueError(
            f'{source}: {len(unknown)} key(s) this converter does not know; '
            f'refusing to drop weights silently: {unknown[:10]}')
    return out


def require_keys(state_dict: Dict[str, Tensor], keys: Iterable[str],
                 source: str) -> None:
    """Raise a clear error if ``state_dict`` is not in the ``source`` format.
    """
    missing = [k for k in keys if k not in state_dict]
    if missing:
        sample = list(state_dict)[:8]
        raise ValueError(
            f'not a state dict in the {source} format: missing {missing}; '
            f'its first keys are {sample}')
