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

The tools and APIs (``tools/test.py``, the inferencer, the ONNX export,
the analysis and visualization tools) load a trained model through the
one front-end :func:`load_model_weights`: the file is read once
(:class:`ModelCheckpoint`, by
:func:`~mmlocat.utils.checkpoint_io.read_checkpoint`), a wrapper's
``module.`` prefix is stripped, the whole model (or, where the caller
accepts it, the backbone alone) is loaded strictly and the coverage is
reported from that same state dict; the checkpoint's ``meta`` comes back
with the report.
"""
from collections import Counter, OrderedDict
from typing import (Dict, Iterable, Mapping, NamedTuple, Optional, Sequence,
                    Union)

import torch
from torch import nn

from . import checkpoint_io
from .checkpoint_io import (LoadReport, load_state_dict_reported,
                            read_state_dict, refuse_nonfinite_weights,
                            strip_prefix, unwrap_state_dict)

__all__ = [
    'pretrained_init_cfg', 'is_pretrained_cfg', 'select_prefix',
    'drop_expected_unused', 'load_pretrained', 'ModelCheckpoint',
    'LoadedWeights', 'load_model_weights', 'BACKBONE_PREFIX', 'WRAPPER_PREFIX'
]

#: Where a whole model keeps its backbone: the hosts' attribute name, hence
#: the prefix of its keys in training checkpoints and in what mmlocat's
#: converters write.
BACKBONE_PREFIX = 'backbone.'
#: What a model wrapper (DDP, ``DataParallel``) puts before every key;
#: stripped from every key that has it (mmengine's ``revise_keys``
#: default).
WRAPPER_PREFIX = 'module.'

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


def _leading_prefixes(keys: Iterable[str]) -> Sequence[str]:
    """First dotted components (``'backbone.'``), most frequent first."""
    counts = Counter(k.split('.', 1)[0] + '.' for k in keys if '.' in k)
    return [p for p, _ in counts.most_common()]


def _keys_under(state_dict: Mapping[str, torch.Tensor],
                prefix: str) -> 'OrderedDict[str, torch.Tensor]':
    """The tensors whose keys start with ``prefix``, the prefix removed."""
    return OrderedDict((k[len(prefix):], v) for k, v in state_dict.items()
                       if k.startswith(prefix))


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
        selected = _keys_under(state_dict, prefix)
        if not selected:
            raise ValueError(
                f'no key of {source} starts with {prefix!r}; its keys start '
                f'with {list(_leading_prefixes(state_dict))[:5]}')
        return selected
    model_keys = set(model_keys)
    if model_keys.isdisjoint(state_dict):
        for candidate in _leading_prefixes(state_dict):
            if not model_keys.isdisjoint(_keys_under(state_dict, candidate)):
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
        read_state_dict(checkpoint), init_cfg.get('prefix'), model_keys,
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


class ModelCheckpoint(NamedTuple):
    """A checkpoint read once, for :func:`load_model_weights`.

    Attributes:
        source: Its path or URL (named in messages).
        checkpoint: What the file holds (an mmengine checkpoint's dict, or
            a bare state dict): what the Runner's ``after_load_checkpoint``
            hooks are given.
        state_dict: Its tensors: unwrapped from ``state_dict`` / ``model``
            / ``module`` nesting, :data:`WRAPPER_PREFIX` stripped, NaN / inf
            refused.
        meta: Its ``meta`` (``dataset_meta``, ``vocabulary``, provenance);
            ``{}`` when it has none.
    """
    source: str
    checkpoint: object
    state_dict: 'OrderedDict[str, torch.Tensor]'
    meta: Dict

    @classmethod
    def read(cls, source: str) -> 'ModelCheckpoint':
        """Read ``source`` (a path or URL) with
        :func:`~mmlocat.utils.checkpoint_io.read_checkpoint`.

        Raises:
            FileNotFoundError / ValueError: As ``read_checkpoint``, and if
                it holds no state dict of tensors or NaN / inf weights.
        """
        return cls.of(checkpoint_io.read_checkpoint(source), source)

    @classmethod
    def of(cls, checkpoint: object, source: str) -> 'ModelCheckpoint':
        """``checkpoint``, what ``source`` holds, already read."""
        state_dict = unwrap_state_dict(checkpoint, source)
        refuse_nonfinite_weights(state_dict, source)
        meta = checkpoint.get('meta') if isinstance(checkpoint, dict) else None
        return cls(source, checkpoint,
                   strip_prefix(state_dict, [WRAPPER_PREFIX]),
                   dict(meta) if isinstance(meta, dict) else {})


class LoadedWeights(NamedTuple):
    """What :func:`load_model_weights` did.

    Attributes:
        part: ``'model'`` or ``'backbone'`` (the rule of
            :func:`load_model_weights`).
        report: The missing / unexpected keys; ``None`` when
            ``strict=False`` let a shape mismatch through.
        checkpoint: What was loaded (its ``meta``, the object read).
    """
    part: str
    report: Optional[LoadReport]
    checkpoint: ModelCheckpoint

    @property
    def meta(self) -> Dict:
        """The checkpoint's ``meta`` (``{}`` when it has none)."""
        return self.checkpoint.meta


def _expected_unused(backbone: Optional[nn.Module],
                     prefix: str) -> Dict[str, str]:
    """The backbone's ``expected_unused_keys()`` under ``prefix``."""
    names = getattr(backbone, 'expected_unused_keys', None)
    if not callable(names):
        return {}
    return {prefix + key: why for key, why in names().items()}


def _parts_not_built(model: nn.Module,
                     state_dict: Mapping[str, torch.Tensor]) -> Dict[str, str]:
    """Top-level parts of the checkpoint's network that ``model`` does not
    build at all (a classifier's ``head`` under a head-less patch-score
    model), mapped to why; none unless the other keys cover ``model``
    (otherwise the error names every key as it is)."""
    model_keys = model.state_dict().keys()
    built = set(dict(model.named_children())) | {
        key.split('.', 1)[0]
        for key in model_keys
    }
    absent = {
        key.split('.', 1)[0]
        for key in state_dict if key.split('.', 1)[0] not in built
    }
    if not absent or not set(model_keys) <= set(state_dict):
        return {}
    name = type(model).__name__
    return {part: f'{name} builds no {part}' for part in sorted(absent)}


def load_model_weights(model: nn.Module,
                       checkpoint: Union[str, ModelCheckpoint],
                       *,
                       strict: bool = True,
                       accept_backbone: bool = False,
                       partial_option: Optional[str] = None,
                       logger=None) -> LoadedWeights:
    """Load a trained model's weights, reading the file once.

    The front-end of ``tools/test.py``, the inferencer, the ONNX export and
    the analysis / visualization tools.

    Whole model or backbone (one rule): the checkpoint is loaded into the
    whole ``model``. With ``accept_backbone``, a checkpoint whose keys do
    not include every key of ``model`` is loaded into ``model.backbone``
    instead: from its keys under :data:`BACKBONE_PREFIX` (stripped) if it
    has any, else from all its keys (a converter's output, a bare backbone
    state dict); the rest of the model stays as built.

    Strict (default): a key the loaded part lacks, a checkpoint key it does
    not have and a tensor of another shape are errors naming them. The
    checkpoint parts the configuration deliberately does not build are
    left out with one log line (:func:`drop_expected_unused`): the
    backbone's ``expected_unused_keys()`` (e.g. the final norm with
    ``final_norm=False``) and, for a whole model the checkpoint otherwise
    covers, a top-level part the model has no module of (the ``head`` of a
    classifier's checkpoint under a head-less ``PatchScoreClassifier``);
    a key inside a part the model builds must match. Position embeddings
    are still resized by the backbone's load hook.

    Args:
        model: The built (unwrapped) model.
        checkpoint: A path or URL, or a :class:`ModelCheckpoint` the caller
            read already (to fail on a bad file before building anything).
        strict: ``False`` only reports missing and unexpected keys and
            lets a shape mismatch through with a warning (those tensors
            stay as built).
        accept_backbone: Load the backbone alone when the checkpoint does
            not cover the whole model (the analysis tools).
        partial_option: How the caller's user turns ``strict`` off (e.g.
            ``'--allow-partial-checkpoint'``), named in the error.
        logger: Logger for the report (default: print).

    Returns:
        The :class:`LoadedWeights` (which part, the report, the checkpoint
        with its ``meta``).

    Raises:
        FileNotFoundError / ValueError: For a bad file
            (:meth:`ModelCheckpoint.read`).
        RuntimeError: With ``strict``, if the checkpoint does not fit the
            part it is loaded into.
    """
    if not isinstance(checkpoint, ModelCheckpoint):
        checkpoint = ModelCheckpoint.read(checkpoint)
    source, state_dict = checkpoint.source, checkpoint.state_dict
    backbone = getattr(model, 'backbone', None)
    part, target, prefix = 'model', model, BACKBONE_PREFIX
    if accept_backbone and not set(model.state_dict()) <= set(state_dict):
        if not isinstance(backbone, nn.Module):
            raise ValueError(f'{source} does not cover '
                             f'{type(model).__name__}, which has no backbone '
                             'to load alone')
        part, target, prefix = 'backbone', backbone, ''
        state_dict = _keys_under(state_dict, BACKBONE_PREFIX) or state_dict
    if strict:
        unused = _expected_unused(backbone, prefix)
        if part == 'model':
            unused.update(_parts_not_built(model, state_dict))
        state_dict = drop_expected_unused(state_dict, unused,
                                          target.state_dict().keys(), source,
                                          type(target).__name__, logger)
    try:
        report = load_state_dict_reported(
            target,
            state_dict,
            allowed_missing=() if strict else [''],
            logger=logger,
            allow_unexpected=not strict,
            source=source)
    except RuntimeError as err:
        if strict or 'another shape' not in str(err):
            hint = (f'; pass {partial_option} to use it anyway'
                    if partial_option else '')
            raise RuntimeError(f'{err}{hint}') from None
        (logger.warning if logger is not None else
         print)(f'{partial_option or "strict=False"}: {err}')
        report = None
    return LoadedWeights(part, report, checkpoint)
