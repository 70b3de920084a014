"""CLIPSelf's released F-ViT detectors (mmdet 2.x) to ``mmlocat.FViT`` keys.

CLIPSelf (Wu et al., ICLR 2024, https://arxiv.org/abs/2310.01403) releases
its F-ViT detectors (``fvit_eva_vit{b16,l14}_ov{coco,lvis}_*.pth``, github
wusize/CLIPSelf ``F-ViT/``) as mmcv 1.x checkpoints: ``state_dict``,
``meta`` (mmdet version, epoch, ``CLASSES``, the config text) and possibly
``optimizer``. The model keys are those of its mmdet 2.28 modules:

* ``backbone.visual.*``: the EVA02-CLIP image tower of CLIPSelf's
  ``open_clip`` fork (EVA repo names), incl. RoPE buffers at the top, in
  every block's attention and cached for the training grid
  (``freqs_{cos,sin}_N``) with their counter ``flag``;
* ``backbone.interpolate{1,2}.*``: the trainable x4 / x2 deconvolutions
  (``interpolate1 = [deconv, norm, GELU, deconv]``, ``interpolate2 =
  [deconv]``; x1 and x0.5 have no weights) built inside F-ViT's backbone;
* ``neck.*`` (mmdet ``FPN``), ``rpn_head.*`` (``RPNHead`` / CLIPSelf's
  ``CustomRPNHead``: ``rpn_conv.i`` ConvModules, ``rpn_cls``,
  ``rpn_reg``), ``roi_head.bbox_head.*`` (``FViTBBoxHead``, an mmdet
  ``ConvFCBBoxHead`` plus ``detect_temperature``, the ``all_embeddings``
  buffer and, with ``learn_bg``, ``bg_embedding``) and
  ``roi_head.mask_head.*`` (``FCNMaskHead``, OV-LVIS).

mmdet 2.28 and mmdet 3.3 name the modules of ``FPN``, ``RPNHead``,
``ConvFCBBoxHead`` and ``FCNMaskHead`` alike (mmcv ``ConvModule``: ``conv``
then ``bn``), so those keys keep their names. What moves is F-ViT's own
structure: the tower goes through :func:`convert_eva02_clip`, the pyramid
deconvolutions to ``neck.0.rescales`` (:class:`mmlocat.PatchScoreNeck`),
the FPN to ``neck.1``, ``detect_temperature`` to ``temperature``. Dropped,
each with its reason (:data:`DROP_REASONS`): the RoPE buffers (checked
against the model's tables first), ``fc_cls`` (built by ``ConvFCBBoxHead``,
never used by ``FViTBBoxHead.forward``), ``all_embeddings`` (the class text
embeddings: mmlocat reads them from the embedding file), and the
checkpoint's ``optimizer`` / ``meta`` entries.
"""
import re
from collections import Counter, OrderedDict
from typing import Dict, List, Mapping, NamedTuple, Optional

from torch import Tensor

from .eva02_clip import convert_eva02_clip, rope_buffer_keys

__all__ = [
    'convert_clipself_fvit', 'clipself_fvit_weights', 'FViTWeights',
    'DROP_REASONS', 'CLASS_EMBEDDINGS_KEY'
]

#: F-ViT's class text embeddings ``(D, C + 1)``, background last.
CLASS_EMBEDDINGS_KEY = 'roi_head.bbox_head.all_embeddings'
#: Why each kind of dropped entry is not converted.
DROP_REASONS = dict(
    rope='RoPE table / cache counter of the EVA tower: derived, checked '
    'against the tables EVA02CLIPViT computes',
    fc_cls="ConvFCBBoxHead's (C + 1)-way classifier, never used by "
    "FViTBBoxHead.forward (the cosine classifier replaces it; mmlocat's "
    "cls_embed='relu_fc' has no fc_cls)",
    embeddings='the class text embeddings: mmlocat reads them from the '
    "head's text_embeddings file (compare or export with the converter's "
    '--text-embeddings / --export-embeddings)',
    optimizer='optimizer state of the training run',
    meta='mmcv 1.x run meta (version, epoch, iter and CLASSES are '
    'recorded in the output meta)')
_META_FIELDS = ('mmdet_version', 'mmcv_version', 'epoch', 'iter')
# The F-ViT keys that keep their names (mmdet 2.28 == mmdet 3.3 layout).
_SAME = ('rpn_head.', 'roi_head.bbox_head.shared_convs.',
         'roi_head.bbox_head.shared_fcs.', 'roi_head.bbox_head.cls_convs.',
         'roi_head.bbox_head.cls_fcs.', 'roi_head.bbox_head.reg_convs.',
         'roi_head.bbox_head.reg_fcs.', 'roi_head.bbox_head.fc_reg.',
         'roi_head.mask_head.')
_INTERPOLATE = re.compile(r'^backbone\.interpolate([1-4])\.(\d+)\.(.+)$')
_VISUAL = 'backbone.visual.'


class FViTWeights(NamedTuple):
    """What :func:`clipself_fvit_weights` found.

    Attributes:
        state_dict: ``mmlocat.FViT`` keys (no prefix).
        dropped: Every source entry not converted -> the key of its reason
            in :data:`DROP_REASONS`.
        class_embeddings: F-ViT's ``(C + 1, D)`` class text embeddings
            (background last) as stored in the checkpoint, or None.
        meta: ``mmdet_version``, ``mmcv_version``, ``epoch``, ``iter`` and
            ``classes`` (the ``CLASSES`` of the training dataset) where the
            checkpoint's meta has them.
    """
    state_dict: 'OrderedDict[str, Tensor]'
    dropped: Dict[str, str]
    class_embeddings: Optional[Tensor]
    meta: dict

    def describe(self) -> str:
        """Lines for the converter's report: what was dropped and why."""
        counts = Counter(self.dropped.values())
        lines = [f'converted {len(self.state_dict)} tensors']
        for reason, count in counts.items():
            lines.append(f'dropped {count} ({reason}): '
                         f'{DROP_REASONS[reason]}')
        return '\n'.join(lines)


def _interpolate_key(match: 're.Match', has_norm: bool) -> str:
    """``backbone.interpolate{n}.{i}.rest`` -> ``neck.0.rescales.{n-1}...``.

    F-ViT's x4 stack is always ``[deconv, norm or Identity, GELU, deconv]``;
    ``PatchScoreNeck`` leaves the norm out when it has none, so the second
    deconv is then at index 2.
    """
    level, index, rest = int(match.group(1)), int(
        match.group(2)), match.group(3)
    if level == 1 and index == 3 and not has_norm:
        index = 2
    return f'neck.0.rescales.{level - 1}.{index}.{rest}'


def convert_clipself_fvit(state_dict: Mapping[str, Tensor],
                          rope_pt_seq_len: float = 16) -> FViTWeights:
    """Map an F-ViT ``state_dict`` (CLIPSelf, mmdet 2.x) to ``FViT`` keys.

    Args:
        state_dict: The checkpoint's model tensors (mmdet 2.x names,
            optionally under ``module.``).
        rope_pt_seq_len: RoPE pre-training grid side of the
            :class:`~mmlocat.models.EVA02CLIPViT` that will load the tower
            (16 for CLIPSelf's EVA02-CLIP B/16 and L/14-336).

    Returns:
        :class:`FViTWeights` (``meta`` empty: see
        :func:`clipself_fvit_weights` for whole checkpoint files).

    Raises:
        ValueError: Not an F-ViT state dict (e.g. an mmlocat one, a bare
            CLIP tower), a key this converter does not know (nothing is
            dropped silently), or RoPE tables of other settings.
    """
    state_dict = OrderedDict(
        (k[len('module.'):] if k.startswith('module.') else k, v)
        for k, v in state_dict.items())
    if not any(k.startswith(_VISUAL) for k in state_dict):
        first = list(state_dict)[:8]
        hint = (' (already mmlocat.FViT keys?)' if any(
            k.startswith('neck.0.rescales.') for k in state_dict) else '')
        raise ValueError(
            'not a CLIPSelf F-ViT state dict: no backbone.visual.* (EVA02-'
            f'CLIP tower) keys{hint}; its first keys are {first}')
    if 'roi_head.bbox_head.detect_temperature' not in state_dict:
        raise ValueError(
            'the F-ViT state dict has no roi_head.bbox_head.'
            'detect_temperature: its box head used a fixed temperature '
            '(FViTBBoxHead fixed_temperature != 0), which the weights do not '
            'record; this converter supports learned temperatures only')
    tower = OrderedDict((k[len(_VISUAL):], v) for k, v in state_dict.items()
                        if k.startswith(_VISUAL))
    out = OrderedDict(
        ('backbone.' + k, v)
        for k, v in convert_eva02_clip(tower, rope_pt_seq_len).items())
    dropped = {_VISUAL + k: 'rope' for k in rope_buffer_keys(tower)}
    has_norm = any(
        k.startswith('backbone.interpolate1.1.') for k in state_dict)
    unknown: List[str] = []
    for key, value in state_dict.items():
        if key.startswith(_VISUAL):
            continue
        match = _INTERPOLATE.match(key)
        if match is not None:
            out[_interpolate_key(match, has_norm)] = value
        elif key.startswith('neck.'):
            out['neck.1.' + key[len('neck.'):]] = value
        elif key.startswith(_SAME):
            out[key] = value
        elif key == 'roi_head.bbox_head.detect_temperature':
            out['roi_head.bbox_head.temperature'] = value.reshape(())
        elif key == 'roi_head.bbox_head.bg_embedding':
            # (D, 1) column in F-ViT, a (D,) vector in CosineSimBBoxHead
            out[key] = value.reshape(-1)
        elif key.startswith('roi_head.bbox_head.fc_cls.'):
            dropped[key] = 'fc_cls'
        elif key == CLASS_EMBEDDINGS_KEY:
            dropped[key] = 'embeddings'
        else:
            unknown.append(key)
    if unknown:
        raise ValueError(
            f'{len(unknown)} F-ViT key(s) this converter does not know; '
            f'refusing to drop weights silently: {unknown[:10]}')
    embeddings = state_dict.get(CLASS_EMBEDDINGS_KEY)
    if embeddings is not None:
        embeddings = embeddings.t().contiguous()
    return FViTWeights(out, dropped, embeddings, {})


def _meta_summary(meta: object) -> dict:
    if not isinstance(meta, Mapping):
        return {}
    out = {k: meta[k] for k in _META_FIELDS if k in meta}
    classes = meta.get('CLASSES')
    if isinstance(classes,
                  (list, tuple)) and all(isinstance(c, str) for c in classes):
        out['classes'] = list(classes)
    return out


def clipself_fvit_weights(checkpoint: object,
                          source: str = 'the checkpoint',
                          rope_pt_seq_len: float = 16) -> FViTWeights:
    """Convert what an F-ViT checkpoint file holds.

    Args:
        checkpoint: The loaded file: an mmcv 1.x checkpoint dict
            (``state_dict``, ``meta``, optionally ``optimizer``) or a bare
            state dict.
        source: Name of the file in messages.
        rope_pt_seq_len: As :func:`convert_clipself_fvit`.

    Raises:
        ValueError: Top-level entries other than those three, or anything
            :func:`convert_clipself_fvit` refuses (prefixed by ``source``).
    """
    if not isinstance(checkpoint, Mapping):
        raise ValueError(f'{source} holds a {type(checkpoint).__name__}, not '
                         'a checkpoint dict')
    entries: Dict[str, str] = {}
    meta: dict = {}
    if isinstance(checkpoint.get('state_dict'), Mapping):
        other = [
            k for k in checkpoint
            if k not in ('state_dict', 'meta', 'optimizer')
        ]
        if other:
            raise ValueError(f'{source}: entries {other} besides state_dict '
                             '/ meta / optimizer; not an mmcv checkpoint of '
                             'F-ViT')
        meta = _meta_summary(checkpoint.get('meta'))
        entries = {
            k: k
            for k in ('meta', 'optimizer') if checkpoint.get(k) is not None
        }
        state_dict = checkpoint['state_dict']
    else:
        state_dict = checkpoint
    if not state_dict or not all(
            isinstance(v, Tensor) for v in state_dict.values()):
        raise ValueError(f'{source} holds no state dict of tensors')
    try:
        weights = convert_clipself_fvit(state_dict, rope_pt_seq_len)
    except ValueError as err:
        raise ValueError(f'{source}: {err}') from err
    dropped = dict(weights.dropped)
    dropped.update(entries)
    return weights._replace(dropped=dropped, meta=meta)
