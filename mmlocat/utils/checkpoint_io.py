"""Reading foreign checkpoints and loading them with an honest report.

Shared by the model converters: a checkpoint may be a raw state dict or one
nested under ``state_dict`` / ``model`` / ``module``, stored as ``.pth``,
``.pt``, ``.bin`` or ``.safetensors``. Loading always reports missing and
unexpected keys, so a converted model never runs silently half-random.
"""
import os.path as osp
from collections import OrderedDict
from typing import Dict, Iterable, List, NamedTuple, Optional

import torch
from torch import nn

__all__ = [
    'read_state_dict', 'save_checkpoint', 'strip_prefix', 'LoadReport',
    'load_state_dict_reported'
]

_NESTED_KEYS = ('state_dict', 'model', 'module', 'model_ema')


def read_state_dict(path: str) -> 'OrderedDict[str, torch.Tensor]':
    """Read a state dict from ``.pth``/``.pt``/``.bin``/``.safetensors``.

    Args:
        path: File to read.

    Returns:
        The tensors of the checkpoint, unwrapped from ``state_dict`` /
        ``model`` / ``module`` nesting.

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        ValueError: If the file holds no state dict of tensors.
    """
    if not osp.isfile(path):
        raise FileNotFoundError(f'checkpoint not found: {path}')
    if path.endswith('.safetensors'):
        try:
            from safetensors.torch import load_file
        except ImportError as e:  # pragma: no cover - depends on env
            raise ImportError('reading .safetensors needs the `safetensors` '
                              'package: pip install safetensors') from e
        obj = load_file(path, device='cpu')
    else:
        try:
            obj = torch.load(path, map_location='cpu', weights_only=True)
        except Exception as e:
            raise ValueError(
                f'{path} is not a readable PyTorch checkpoint ({e})') from e
    for _ in range(2):  # e.g. {'model': {'state_dict': ...}}
        if isinstance(obj, dict):
            nested = [k for k in _NESTED_KEYS if isinstance(obj.get(k), dict)]
            if nested:
                obj = obj[nested[0]]
    if not isinstance(obj, dict) or not obj or not all(
            isinstance(v, torch.Tensor) for v in obj.values()):
        raise ValueError(f'{path} does not contain a state dict of tensors '
                         f'(found {type(obj).__name__})')
    return OrderedDict(obj)


def strip_prefix(state_dict: Dict[str, torch.Tensor],
                 prefixes: Iterable[str]) -> Dict[str, torch.Tensor]:
    """Remove the first matching prefix (e.g. ``module.``) from every key."""
    out = OrderedDict()
    for key, value in state_dict.items():
        for prefix in prefixes:
            if key.startswith(prefix):
                key = key[len(prefix):]
                break
        out[key] = value
    return out


def save_checkpoint(state_dict: Dict[str, torch.Tensor],
                    path: str,
                    meta: Optional[dict] = None) -> None:
    """Save an mmengine-style checkpoint ``{'state_dict', 'meta'}``."""
    dirname = osp.dirname(osp.abspath(path))
    if not osp.isdir(dirname):
        raise FileNotFoundError(f'output folder does not exist: {dirname}')
    torch.save(dict(state_dict=state_dict, meta=meta or {}), path)


class LoadReport(NamedTuple):
    """Keys that did not line up when loading a state dict."""
    missing: List[str]
    unexpected: List[str]

    def __str__(self) -> str:
        return (f'missing keys ({len(self.missing)}): {self.missing}\n'
                f'unexpected keys ({len(self.unexpected)}): '
                f'{self.unexpected}')


def load_state_dict_reported(module: nn.Module,
                             state_dict: Dict[str, torch.Tensor],
                             allowed_missing: Iterable[str] = (),
                             logger=None) -> LoadReport:
    """Load ``state_dict`` and refuse to leave unexplained random weights.

    Args:
        module: Model to load into.
        state_dict: Tensors to load.
        allowed_missing: Key substrings that may be missing because they are
            new parameters that keep their fresh initialisation (e.g.
            ``'attn.gaug.'`` when a plain ViT is loaded into LocAtViT).
        logger: Optional logger; the report is printed if ``None``.

    Returns:
        The :class:`LoadReport`.

    Raises:
        RuntimeError: If a key is missing that is not allowed, or if any key
            is unexpected, or on a shape mismatch.
    """
    allowed = tuple(allowed_missing)
    result = module.load_state_dict(state_dict, strict=False)
    report = LoadReport(
        list(result.missing_keys), list(result.unexpected_keys))
    bad_missing = [
        k for k in report.missing if not any(a in k for a in allowed)
    ]
    new_params = [k for k in report.missing if k not in bad_missing]
    message = str(report)
    if new_params:
        message += f'\nnewly initialised ({len(new_params)}): {new_params}'
    (logger.info if logger is not None else print)(message)
    if bad_missing or report.unexpected:
        raise RuntimeError('refusing to run a partly random network; '
                           f'unexplained keys:\n{message}')
    return report
