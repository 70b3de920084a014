"""The one loading policy of mmlocat's backbones and tools.

``init_cfg=dict(type='Pretrained', checkpoint=..., prefix=...)`` on any
mmlocat backbone goes through :func:`load_pretrained` instead of mmengine's
lenient loader (which only warns and may leave every weight random):

* strict: every model key must come from the checkpoint, and every
  checkpoint key (after ``prefix``) must name a model key;
* the keys allowed to be new are explicit: a backbone's ``new_key_groups``
  (LocAtViT: ``'attn.gaug.'``, only when the checkpoint holds no GAug key at
  all, i.e. a plain ViT) and the optional ``allowed_missing`` substrings of
  ``init_cfg``;
* the keys allowed to be left over are explicit too: the parts of the
  checkpoint's network that the backbone's configuration does not build
  (``expected_unused``: e.g. the final norm ``ln1`` with
  ``final_norm=False``, declared by each backbone's
  ``expected_unused_keys()``) are dropped with one log line naming them;
  any other checkpoint key the model lacks is still an error;
* a checkpoint whose keys all carry a prefix the model lacks (what every
  converter writes: ``backbone.*``) is an error naming the fix;
* a shape mismatch is an error; position embeddings are still resized by
  the backbone's load hook.

:func:`check_checkpoint_covers` applies the same report to a whole model
for ``tools/test.py``.
"""
from collections import Counter, OrderedDict
from typing import Dict, Iterable, Mapping, Optional, Sequence

import torch
from torch import nn

from .checkpoint_io import (LoadReport, load_state_dict_reported,
                            read_state_dict, strip_prefix, unwrap_state_dict)

__all__ = [
    'pretrained_init_cfg', 'is_pretrained_cfg', 'read_checkpoint',
    'select_prefix', 'drop_expected_unused', 'load_pretrained',
    'check_checkpoint_covers'
]

_INIT_CFG_KEYS = ('type', 'checkpoint', 'prefix', 'map_location',
                  'allowed_missing')


def _is_pretrained_type(init_type) -> bool:
    """``'Pretrained'``, a scoped name of it or mmengine's class."""
    if isinstance(init_type, type):
        return init_type.__name__ == 'PretrainedInit'
    return str(init_type).split('.')[-1] == 'Pretrained'


def pretrained_init_cfg(pretrained: Optional[str], init_cfg=None):
    """``init_cfg``, or the one mmseg's ``pretrained=`` path stands for.

    mmseg's segmentors inject ``backbone.pretrained``; every mmlocat
    backbone turns it into ``dict(type='Pretrained', checkpoint=...)``
    here, so it is loaded by :func:`load_pretrained` like any other.

    Raises:
        ValueError: If both are given.
    """
    if pretrained is None:
        return init_cfg
    if init_cfg is not None:
        raise ValueError('give either pretrained or init_cfg, not both '
                         f'(got pretrained={pretrained!r} and init_cfg='
                         f'{init_cfg!r})')
    return dict(type='Pretrained', checkpoint=pretrained)


def is_pretrained_cfg(init_cfg) -> bool:
    """Whether ``init_cfg`` is one ``dict(type='Pretrained', ...)``.

    ``type`` may be scoped (``'mmengine.Pretrained'``) or mmengine's
    ``PretrainedInit`` class. A list that contains a ``Pretrained`` entry
    is refused: mmengine would load it with its lenient loader, and a
    random-init entry after it would overwrite the loaded weights.

    Raises:
        ValueError: For a list ``init_cfg`` with a ``Pretrained`` entry.
    """
    if isinstance(init_cfg, (list, tuple)):
        if any(
                isinstance(c, dict) and _is_pretrained_type(c.get('type'))
                for c in init_cfg):
            raise ValueError(
                'init_cfg is a list with a Pretrained entry; give the '
                'Pretrained dict alone (mmlocat loads it strictly): '
                f'{init_cfg!r}')
        return False
    return isinstance(init_cfg, dict) and _is_pretrained_type(
        init_cfg.get('type'))


def read_checkpoint(checkpoint: str) -> 'OrderedDict[str, torch.Tensor]':
    """A state dict from a local file or an mmengine URL (``scheme://``)."""
    if not isinstance(checkpoint, str) or not checkpoint:
        raise ValueError(
            f'checkpoint must be a file path or URL, got {checkpoint!r}')
    if '://' not in checkpoint:
        return read_state_dict(checkpoint)
    from mmengine.runner.checkpoint import CheckpointLoader

    from .safe_load import mmengine_checkpoint_globals
    with mmengine_checkpoint_globals():
        obj = CheckpointLoader.load_checkpoint(checkpoint, map_location='cpu')
    return unwrap_state_dict(obj, checkpoint)


def _leading_prefixes(keys: Iterable[str]) -> Sequence[str]:
    """First dotted components (``'backbone.'``), most frequent first."""
    counts = Counter(k.split('.', 1)[0] + '.' for k in keys if '.' in k)
    return [p for p, _ in counts.most_common()]


def select_prefix(state_dict: Dict[str, torch.Tensor],
                  prefix: Optional[str],
                  model_keys: Iterable[str],
                  source: str,
                  model_name: str = 'the model') -> Dict[str, torch.Tensor]:
    """Keep and strip the keys under ``prefix``, or explain a missing one.

    Args:
        state_dict: Checkpoint tensors.
        prefix: Key prefix to select (a trailing ``.`` is added), or
            ``None``.
        model_keys: The model's state-dict keys.
        source: Checkpoint name for messages.
        model_name: Model name for messages.

    Raises:
        ValueError: If no key starts with ``prefix``, or (without
            ``prefix``) no key names a model key while the keys under one
            prefix do; the message names ``prefix=...`` as the fix.
    """
    if prefix:
        prefix = prefix if prefix.endswith('.') else prefix + '.'
        selected = OrderedDict((k[len(prefix):], v)
                               for k, v in state_dict.items()
                               if k.startswith(prefix))
        if not selected:
            raise ValueError(
                f'no key of {source} starts with {prefix!r}; its keys start '
                f'with {list(_leading_prefixes(state_dict))[:5]}')
        return selected
    model_keys = set(model_keys)
    if model_keys.isdisjoint(state_dict):
        for candidate in _leading_prefixes(state_dict):
            stripped = strip_prefix(
                {
                    k: v
                    for k, v in state_dict.items() if k.startswith(candidate)
                }, [candidate])
            if not model_keys.isdisjoint(stripped):
                raise ValueError(
                    f'none of the {len(state_dict)} keys of {source} names a '
                    f'parameter of {model_name}, but its keys under '
                    f'{candidate!r} do: add prefix={candidate!r} to '
                    "init_cfg (mmlocat's converters and mmengine training "
                    "checkpoints store the backbone under 'backbone.')")
    return state_dict


def _names_part(key: str, part: str) -> bool:
    """Whether ``key`` is the parameter ``part`` or lies in module ``part``.
    """
    return key == part or key.startswith(part + '.')


def drop_expected_unused(state_dict: Dict[str, torch.Tensor],
                         expected_unused: Mapping[str, str],
                         model_keys: Iterable[str],
                         source: str,
                         model_name: str = 'the model',
                         logger=None) -> Dict[str, torch.Tensor]:
    """Drop the checkpoint keys a configuration deliberately does not use.

    A key is dropped only if the model does not have it and it is the
    parameter or lies in the module named by a key of ``expected_unused``
    (``'ln1'`` matches ``ln1.weight``, never ``layers.0.ln1.weight``). All
    dropped keys are named in one log line, with the reasons.

    Args:
        state_dict: Checkpoint tensors (after the prefix is stripped).
        expected_unused: Top-level parameter / module names the model does
            not build, mapped to why (e.g. ``{'ln1': 'final_norm=False'}``).
        model_keys: The model's state-dict keys.
        source: Checkpoint name for the log line.
        model_name: Model name for the log line.
        logger: Logger (default: print).

    Returns:
        ``state_dict`` without the dropped keys.
    """
    model_keys = set(model_keys)
    dropped = {}
    for key in state_dict:
        if key in model_keys:
            continue
        part = next((p for p in expected_unused if _names_part(key, p)), None)
        if part is not None:
            dropped[key] = part
    if not dropped:
        return state_dict
    reasons = '; '.join(f'{part}: {expected_unused[part]}'
                        for part in dict.fromkeys(dropped.values()))
    (logger.info if logger is not None else print)(
        f'{model_name} does not use {len(dropped)} tensor(s) of {source} '
        f'({reasons}); left out: {sorted(dropped)}')
    return OrderedDict(
        (k, v) for k, v in state_dict.items() if k not in dropped)


def load_pretrained(
        module: nn.Module,
        init_cfg: dict,
        new_key_groups: Sequence[str] = (),
        logger=None,
        expected_unused: Optional[Mapping[str, str]] = None) -> LoadReport:
    """Load ``init_cfg=dict(type='Pretrained', ...)`` strictly.

    Args:
        module: The freshly (randomly) initialised backbone.
        init_cfg: ``type='Pretrained'``, ``checkpoint`` (path or URL),
            optional ``prefix`` (e.g. ``'backbone.'``), optional
            ``allowed_missing`` (key substrings allowed to stay random) and
            ``map_location`` (ignored: tensors are read on the CPU).
        new_key_groups: Key substrings of parameters the backbone may add to
            a plain checkpoint: allowed to be missing only when the
            checkpoint holds none of them (all new, never half-loaded).
        logger: Logger for the load report (default: print).
        expected_unused: Top-level parameter / module names of the
            checkpoint's network that this configuration does not build,
            mapped to why (a backbone's ``expected_unused_keys()``); those
            checkpoint keys are dropped with one log line (see
            :func:`drop_expected_unused`). Any other unexpected key raises.

    Returns:
        The :class:`LoadReport`.

    Raises:
        ValueError: On an unknown ``init_cfg`` key, a bad ``prefix`` or a
            missing one (see :func:`select_prefix`), or a bad file.
        RuntimeError: On missing / unexpected keys or a shape mismatch.
    """
    unknown = sorted(set(init_cfg) - set(_INIT_CFG_KEYS))
    if unknown:
        raise ValueError(f'unknown init_cfg key(s) {unknown} for '
                         f'Pretrained; known: {list(_INIT_CFG_KEYS)}')
    if 'checkpoint' not in init_cfg:
        raise ValueError("init_cfg=dict(type='Pretrained') needs checkpoint=")
    checkpoint = init_cfg['checkpoint']
    name = type(module).__name__
    model_keys = module.state_dict().keys()
    state_dict = select_prefix(
        read_checkpoint(checkpoint), init_cfg.get('prefix'), model_keys,
        checkpoint, name)
    state_dict = drop_expected_unused(state_dict, expected_unused or {},
                                      model_keys, checkpoint, name, logger)
    allowed = list(init_cfg.get('allowed_missing', ()))
    allowed += [
        group for group in new_key_groups
        if not any(group in key for key in state_dict)
    ]
    return load_state_dict_reported(
        module,
        state_dict,
        allowed_missing=allowed,
        logger=logger,
        source=checkpoint)


def check_checkpoint_covers(
    model: nn.Module,
    checkpoint: str,
    allow_partial: bool = False,
    logger=None,
    state_dict: Optional[Dict[str,
                              torch.Tensor]] = None) -> Optional[LoadReport]:
    """Refuse to evaluate ``model`` with a checkpoint that leaves it random.

    Loads ``checkpoint`` (an mmengine training checkpoint or a converted
    one; a ``module.`` prefix is stripped as mmengine does) into ``model``:
    missing keys and shape mismatches are errors, keys the model does not
    have are only reported (e.g. an EMA copy).

    Args:
        model: The (unwrapped) model about to be tested.
        checkpoint: Path or URL.
        allow_partial: Report, but do not refuse, missing keys and shape
            mismatches (``tools/test.py --allow-partial-checkpoint``).
        logger: Logger for the report (default: print).
        state_dict: The checkpoint's tensors when the caller has already
            read them with :func:`read_checkpoint` (``tools/infer.py``
            reads before it builds anything); ``checkpoint`` then only
            names them.

    Returns:
        The report, or ``None`` when ``allow_partial`` let a shape mismatch
        through.

    Raises:
        RuntimeError: Unless ``allow_partial``, if the checkpoint does not
            cover the model.
    """
    if state_dict is None:
        state_dict = read_checkpoint(checkpoint)
    state_dict = strip_prefix(state_dict, ['module.'])
    try:
        return load_state_dict_reported(
            model,
            state_dict,
            allowed_missing=[''] if allow_partial else (),
            logger=logger,
            allow_unexpected=True,
            source=checkpoint)
    except RuntimeError as err:
        if not allow_partial or 'another shape' not in str(err):
            raise RuntimeError(
                f'{err}; pass --allow-partial-checkpoint to evaluate it '
                'anyway') from None
        (logger.warning if logger is not None else
         print)(f'--allow-partial-checkpoint: {err}')
        return None
