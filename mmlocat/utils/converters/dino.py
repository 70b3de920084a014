"""facebookresearch DINO ViT to ``mmlocat.LaStViT`` backbone keys.

DINO (Caron et al., https://arxiv.org/abs/2104.14294) ViT-S / ViT-B use
timm-style names (``blocks.i.norm1``, ``attn.qkv``, ``mlp.fc1``, ``norm``),
LayerNorm eps 1e-6 and qkv bias, i.e. a :class:`LaStViT` with default
options (``arch='deit-small'`` or ``'base'``).

Two file layouts are read. DINO's released backbones (and LOST's, which
loads them) are a bare backbone state dict. A DINO *training* checkpoint
(``main_dino.py``'s ``checkpoint*.pth``, the layout of the LaSt-ViT
authors' DINO release ``dino0080.pth``) is a dict with ``student``,
``teacher``, ``optimizer``, ``epoch``, ``args``, ``dino_loss`` (and
``fp16_scaler``); each network is a multi-crop wrapper with ``backbone.*``
and the projection head ``head.*``, the student's also under ``module.``
(DDP). :func:`dino_backbone_weights` takes the teacher by default: DINO's
own evaluations (``eval_knn.py``, ``eval_linear.py``,
``visualize_attention.py``: ``--checkpoint_key teacher``) and its released
backbones use the teacher, the EMA of the student, which the DINO paper
finds the better network throughout training.
"""
from collections import OrderedDict
from typing import Dict, List, Mapping, NamedTuple, Optional

from torch import Tensor

from ..checkpoint_io import strip_prefix, unwrap_state_dict
from ._keymap import rename_keys, require_keys

__all__ = [
    'convert_dino', 'dino_backbone_weights', 'DinoWeights',
    'DINO_CHECKPOINT_KEYS'
]

#: The networks of a DINO training checkpoint.
DINO_CHECKPOINT_KEYS = ('teacher', 'student')

_TOP = {
    'cls_token': 'cls_token',
    'pos_embed': 'pos_embed',
    'patch_embed.proj': 'patch_embed.projection',
    'norm': 'ln1',
}
_BLOCK = {
    'norm1': 'ln1',
    'attn.qkv': 'attn.qkv',
    'attn.proj': 'attn.proj',
    'norm2': 'ln2',
    'mlp.fc1': 'ffn.layers.0.0',
    'mlp.fc2': 'ffn.layers.1',
}
_HEAD = 'head.'


class DinoWeights(NamedTuple):
    """What :func:`dino_backbone_weights` found.

    Attributes:
        state_dict: Backbone tensors in DINO's names, without ``module.`` /
            ``backbone.`` and without the head.
        layout: ``'training'`` (a ``main_dino.py`` checkpoint) or
            ``'backbone'`` (a bare state dict).
        key: The network taken from a training checkpoint, else None.
        head: The dropped ``head.*`` keys (DINO's projection head).
        meta: ``epoch``, ``arch`` and ``patch_size`` where the checkpoint
            records them, and ``not_converted`` (its other entries).
    """
    state_dict: 'OrderedDict[str, Tensor]'
    layout: str
    key: Optional[str]
    head: List[str]
    meta: dict

    def describe(self) -> str:
        """One line for the converter's report."""
        meta = self.meta
        if self.layout == 'training':
            where = (f"DINO training checkpoint (epoch {meta.get('epoch')}, "
                     f"arch {meta.get('arch')}, patch "
                     f"{meta.get('patch_size')}): the {self.key}'s backbone")
        else:
            where = 'bare DINO backbone state dict'
        line = (f'{where}, {len(self.state_dict)} tensors; dropped '
                f'{len(self.head)} head tensors (head.*)')
        if meta.get('not_converted'):
            line += f"; not converted: {', '.join(meta['not_converted'])}"
        return line


def _args_field(args: object, name: str) -> object:
    value = getattr(args, name, None)
    if value is None and isinstance(args, Mapping):
        value = args.get(name)
    return value if isinstance(value, (str, int, float)) else None


def dino_backbone_weights(checkpoint: object,
                          key: str = 'teacher',
                          source: str = 'the checkpoint') -> DinoWeights:
    """The backbone tensors of a DINO checkpoint, in DINO's names.

    Args:
        checkpoint: What the file holds (:func:`~mmlocat.utils.
            checkpoint_io.read_checkpoint`): a training checkpoint dict or
            a (possibly ``state_dict`` / ``model`` nested) state dict.
        key: ``'teacher'`` (default, see the module docstring) or
            ``'student'``; used for training checkpoints only.
        source: Name of the file in messages.

    Raises:
        ValueError: An unknown ``key``, or a training checkpoint without
            that network.
    """
    if key not in DINO_CHECKPOINT_KEYS:
        raise ValueError(f'key must be one of {DINO_CHECKPOINT_KEYS}, got '
                         f'{key!r}')
    meta: dict = {}
    layout, taken = 'backbone', None
    if isinstance(checkpoint, Mapping) and any(k in checkpoint
                                               for k in DINO_CHECKPOINT_KEYS):
        if key not in checkpoint:
            raise ValueError(
                f'{source} is a DINO training checkpoint without {key!r} '
                f'(it has {sorted(map(str, checkpoint))})')
        layout, taken = 'training', key
        args = checkpoint.get('args')
        meta = dict(
            epoch=checkpoint.get('epoch'),
            arch=_args_field(args, 'arch'),
            patch_size=_args_field(args, 'patch_size'),
            not_converted=[str(k) for k in checkpoint if k != key])
        checkpoint = checkpoint[key]
    state_dict = unwrap_state_dict(checkpoint,
                                   f'{source} ({key})' if taken else source)
    state_dict = strip_prefix(state_dict, ['module.'])
    state_dict = strip_prefix(state_dict, ['backbone.'])
    head = [k for k in state_dict if k.startswith(_HEAD)]
    backbone = OrderedDict(
        (k, v) for k, v in state_dict.items() if not k.startswith(_HEAD))
    return DinoWeights(backbone, layout, taken, head, meta)


def convert_dino(state_dict: Dict[str, Tensor],
                 drop_head: bool = True) -> 'OrderedDict[str, Tensor]':
    """Map a DINO (timm layout) ViT state dict to LaStViT backbone keys.

    Args:
        state_dict: Backbone tensors, optionally under ``module.`` and/or
            ``backbone.`` (as in DINO's teacher / student weights).
        drop_head: Drop ``head.*`` (DINO's projection head or a linear
            classifier); with ``False`` such keys are an error.

    Returns:
        Backbone keys of :class:`mmlocat.models.LaStViT` (no prefix).

    Raises:
        ValueError: If the dict is not a DINO / timm ViT or holds unknown
            keys (e.g. DINOv2 register or mask tokens).
    """
    state_dict = strip_prefix(state_dict, ['module.'])
    state_dict = strip_prefix(state_dict, ['backbone.'])
    require_keys(state_dict,
                 ['cls_token', 'pos_embed', 'patch_embed.proj.weight'],
                 'DINO / timm ViT')
    return rename_keys(
        state_dict,
        top=_TOP,
        block_pattern=r'^blocks\.(\d+)\.(.+)$',
        block=_BLOCK,
        block_target='layers.{i}.{name}',
        source='DINO / timm ViT',
        skip=(_HEAD, ) if drop_head else ())
