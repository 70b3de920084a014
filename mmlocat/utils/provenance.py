"""Where converted weights and text embeddings came from.

A CLIP image tower (converted by ``tools/model_converters/clip2mmlocat.py``
or ``eva02_clip2mmlocat.py``) and the class text embeddings of an F-ViT head
(``tools/misc/dump_text_embeddings.py``) must come from the same CLIP. Both
tools record the open_clip model ``name`` and the ``sha256`` of the weights
file they read (the converter in the checkpoint's ``meta['clip']``, the
embedding tool in the sidecar's ``text_model``) and, where the file holds a
text tower, its content fingerprint ``text_sha256``
(:func:`text_sha256`) and its MLP activation ``text_act``.

What makes text embeddings fit an image tower is the text tower: one CLIP
is released as several files (OpenAI's TorchScript ``ViT-B-16.pt`` and
open_clip's ``open_clip_pytorch_model.bin`` of it; the EVA repo's
``EVA02_CLIP_B_psz16_s8B.pt`` and open_clip's ``EVA02-B-16`` file), whose
file hashes differ while their text towers are the same tensors.
:func:`check_same_clip` therefore compares ``text_sha256`` when both
records have it (equal: the same CLIP, whatever the files; different:
refused) and the text activation when both have it; records without a
fingerprint (written before it existed, or from a file without a text
tower) fall back to comparing ``name`` and the file ``sha256``
(:func:`check_checkpoint_clip` reads the checkpoint's record first). The
sidecar also records the prompt recipe (``templates``, ``prompt_style``),
which :func:`mmlocat.text.check_prompt_recipe` compares with a consumer's.
"""
import hashlib
import os
import os.path as osp
from typing import Dict, Mapping, Optional, Tuple

import torch
from torch import Tensor

from .checkpoint_io import read_clip_state_dict
from .safe_load import torch_load

__all__ = [
    'file_sha256', 'read_checkpoint_meta', 'clip_provenance',
    'check_same_clip', 'check_checkpoint_clip', 'text_tower_tensors',
    'text_sha256', 'file_text_sha256', 'text_provenance', 'NOT_TEXT_KEYS',
    'TEXT_ACTS'
]

#: Entries of a CLIP file that are not weights of its text tower: the
#: contrastive temperature (and bias), the ints OpenAI's TorchScript
#: archives hold, and the causal mask (a buffer TorchScript keeps).
NOT_TEXT_KEYS = ('logit_scale', 'logit_bias', 'input_resolution',
                 'context_length', 'vocab_size', 'attn_mask')
#: ``text_act`` values: the MLP activation of the text tower.
TEXT_ACTS = ('quick_gelu', 'gelu')


def file_sha256(path: str, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(chunk), b''):
            digest.update(block)
    return digest.hexdigest()


def read_checkpoint_meta(path: str) -> Dict:
    """The ``meta`` dict of an mmengine-style checkpoint file, or ``{}``.

    The file is memory-mapped, so reading the meta of a large checkpoint
    does not read its tensors. Files that are not local mmengine
    checkpoints (URLs, bare state dicts) give ``{}``.
    """
    if not osp.isfile(path):
        return {}
    try:
        obj = torch_load(path, mmap=True)
    except Exception:  # not a zip-format torch file: no meta to read
        return {}
    meta = obj.get('meta') if isinstance(obj, dict) else None
    return dict(meta) if isinstance(meta, dict) else {}


def clip_provenance(model_name: Optional[str], weights: Optional[str]) -> Dict:
    """``{'name', 'weights', 'sha256'}`` of an open_clip model and the
    weights file it was read from (fields that are unknown are left out)."""
    record = {}
    if model_name:
        record['name'] = model_name
    if weights and osp.isfile(weights):
        record['weights'] = osp.basename(weights)
        record['sha256'] = file_sha256(weights)
    return record


def text_tower_tensors(state_dict: Mapping[str, Tensor]) -> Dict[str, Tensor]:
    """The text tower's tensors of a CLIP state dict, under open_clip's
    names without the ``text.`` prefix.

    Every layout of a text tower reads the same: OpenAI's and open_clip's
    ``CLIP`` (top-level ``token_embedding``, ``positional_embedding``,
    ``transformer.*``, ``ln_final``, ``text_projection``), open_clip's
    ``CustomTextCLIP`` and the EVA repo's EVA-CLIP (the same names under
    ``text.``), a text tower file of ``lastclip2mmlocat.py --text-out``.
    Dropped: the image tower (``visual.*``), :data:`NOT_TEXT_KEYS` (also
    under ``text.``) and a ``module.`` prefix.

    Returns:
        ``{}`` when ``state_dict`` holds no text tower (no
        ``token_embedding.weight``: an image tower alone, or a HuggingFace
        text tower).
    """
    out = {}
    for key, value in state_dict.items():
        if key.startswith('module.'):
            key = key[len('module.'):]
        if key.startswith('visual.'):
            continue
        if key.startswith('text.'):
            key = key[len('text.'):]
        if key.split('.')[-1] in NOT_TEXT_KEYS:
            continue
        out[key] = value
    return out if 'token_embedding.weight' in out else {}


def text_sha256(state_dict: Mapping[str, Tensor]) -> Optional[str]:
    """Content fingerprint of the text tower in a CLIP state dict.

    The canonical form hashed (sha256), for each key of
    :func:`text_tower_tensors` in sorted order (Python string order): the
    key in UTF-8, a NUL byte, the shape as decimal sizes joined by ``,``
    (empty for a scalar), a NUL byte, then the values as float32
    little-endian bytes in row-major order. Files of the same weights give
    the same fingerprint whatever their format, key layout or storage
    dtype (OpenAI's fp16 archive and its fp32 open_clip copy: an fp16 value
    is exact in float32).

    Returns:
        The hex digest, or ``None`` when ``state_dict`` holds no text tower.
    """
    tensors = text_tower_tensors(state_dict)
    if not tensors:
        return None
    digest = hashlib.sha256()
    for key in sorted(tensors):
        value = tensors[key].detach().to('cpu', torch.float32).contiguous()
        shape = ','.join(str(s) for s in value.shape)
        digest.update(f'{key}\0{shape}\0'.encode('utf-8'))
        digest.update(value.numpy().astype('<f4', copy=False).tobytes())
    return digest.hexdigest()


def text_provenance(state_dict: Mapping[str, Tensor],
                    act: Optional[str] = None) -> Dict:
    """``{'text_sha256', 'text_act'}`` of the text tower in a CLIP state
    dict (``{}`` without one; ``text_act`` left out when ``act`` is
    unknown)."""
    fingerprint = text_sha256(state_dict)
    if fingerprint is None:
        return {}
    record = dict(text_sha256=fingerprint)
    if act is not None:
        record['text_act'] = act
    return record


_FILE_TEXT_SHA256: Dict[Tuple, Optional[str]] = {}


def file_text_sha256(path: str) -> Optional[str]:
    """:func:`text_sha256` of a CLIP weights file (any format
    :func:`~mmlocat.utils.checkpoint_io.read_clip_state_dict` reads),
    remembered per file (path, size, modification time) in this process.
    """
    stat = os.stat(path)
    key = (osp.realpath(path), stat.st_size, stat.st_mtime_ns)
    if key not in _FILE_TEXT_SHA256:
        _FILE_TEXT_SHA256[key] = text_sha256(read_clip_state_dict(path)[0])
    return _FILE_TEXT_SHA256[key]


EMBEDDINGS_HINT = ('dump the embeddings with the text tower of the same CLIP '
                   '(tools/misc/dump_text_embeddings.py --model / '
                   '--pretrained)')


def _text_tower_of(record: Dict) -> str:
    """``text tower <fingerprint> (<weights> sha256 <hash>)`` of a record,
    for messages."""
    weights = record.get('weights') or 'an unnamed file'
    sha = record.get('sha256')
    source = f'{weights} sha256 {sha}' if sha else weights
    return f'text tower {record.get("text_sha256")} ({source})'


def check_same_clip(text_model: Dict,
                    text_file: str,
                    image_model: Dict,
                    image_file: str,
                    text_kind: str = 'text embeddings',
                    image_kind: str = 'the backbone checkpoint',
                    hint: str = EMBEDDINGS_HINT) -> None:
    """Raise if two provenance records name different CLIPs.

    When both records have ``text_sha256`` (the text tower's content
    fingerprint, :func:`text_sha256`) it decides: equal is the same CLIP
    even if the files differ (two releases of one model, a re-saved file),
    different is refused. Otherwise ``name`` and ``sha256`` (of the weights
    file) are compared, each when both records have it. ``text_act`` (the
    text tower's MLP activation) is compared when both have it: the same
    weights run with QuickGELU and exact GELU give other embeddings.

    Args:
        text_model, image_model: The two records.
        text_file, image_file: Where they were read (for the message).
        text_kind, image_kind: What the two files are (for the message).
        hint: How to fix it (the end of the message).

    Raises:
        ValueError: Naming both files and the differing values (both
            fingerprints and the weights files they come from).
    """
    found, expected = (text_model.get('text_sha256'),
                       image_model.get('text_sha256'))
    if found and expected:
        if found != expected:
            raise ValueError(
                f'{text_kind} {text_file} come from the CLIP '
                f'{_text_tower_of(text_model)} but {image_kind} {image_file} '
                f'from the CLIP {_text_tower_of(image_model)}: the text '
                f'towers differ; {hint}')
    else:
        for key in ('name', 'sha256'):
            found, expected = text_model.get(key), image_model.get(key)
            if (found is not None and expected is not None
                    and found != expected):
                raise ValueError(
                    f'{text_kind} {text_file} come from CLIP {key} '
                    f'{found!r} but {image_kind} {image_file} from '
                    f'{expected!r}; {hint}')
    found, expected = text_model.get('text_act'), image_model.get('text_act')
    if found is not None and expected is not None and found != expected:
        raise ValueError(
            f'{text_kind} {text_file} were encoded with text activation '
            f'{found!r} (open_clip model {text_model.get("name")!r}) but '
            f'{image_kind} {image_file} records {expected!r} (open_clip '
            f'model {image_model.get("name")!r}) for the same CLIP: the '
            'embeddings come from a text tower with the wrong activation; '
            f'{hint}')


def check_checkpoint_clip(text_model: Dict, text_file: str,
                          checkpoint: str) -> None:
    """:func:`check_same_clip` against the ``meta['clip']`` record of an
    image-tower checkpoint (nothing to compare when it records none)."""
    image_model = read_checkpoint_meta(checkpoint).get('clip', {})
    check_same_clip(text_model, text_file, image_model, checkpoint)
