"""Records: what makes a result trustworthy, written and checked here.

Which CLIP a tower and an embedding file come from, which rows an
embedding file holds, which files (class embeddings, class lists) a
checkpoint was trained with: every record, every fingerprint and every
check is in this module, and the model builds (F-ViT, the zero-shot
segmentor, LaSt-CLIP training, the zero-shot metric), the one hook
(:class:`mmlocat.RecordHook`), the tools and the converters call the same
functions.

**Checkpoint meta** (one schema, :data:`META_SCHEMA`, versioned by
:data:`VERSION_KEY`): ``clip`` (:data:`CLIP_KEY`, an image tower's CLIP:
open_clip ``name``, ``weights`` / ``sha256`` of the file converted,
``text_sha256`` / ``text_act`` of its text tower, ``act``, and
``image_sha256``, the fingerprint of the tower's own weights as saved),
``clip_provenance`` (:data:`CLIP_RUN_KEY`, a LaSt-CLIP run's two towers),
``open_clip_text`` (:data:`TEXT_TOWER_KEY`, an exported text tower),
``class_files`` (:data:`CLASS_FILES_KEY`, the files a model read,
:func:`files_record`; written as ``vocabulary``
before, read under either name, :data:`LEGACY_KEYS`), ``clipself_fvit``
(:data:`CLIPSELF_KEY`, a converted CLIPSelf F-ViT's class rows),
``lastclip`` (:data:`LASTCLIP_KEY`), ``source`` / ``converter`` (the file
converted and the tool). :func:`read_checkpoint_meta` is the one reader
(on :func:`~mmlocat.utils.checkpoint_io.read_checkpoint`, weights-only);
a value of the wrong type is an error naming the file and the key.

**Sidecar** (``X.json`` next to ``X.npy``, :mod:`mmlocat.text.embeddings`),
one shape, ``{"classes": [...], "text_model": {...}}`` (the former plain
list of names is read as ``{"classes": list}``,
:func:`~mmlocat.text.embeddings.read_sidecar`):
its ``text_model`` record holds the text tower's record, the prompt recipe
(``templates``, ``templates_sha256``, ``prompt_style``) and ``rows_sha256``
(:func:`rows_sha256`), which binds it to its rows: a sidecar next to
another ``.npy`` is refused when the file is read
(:func:`check_sidecar_rows`).

**Fingerprints**: :func:`file_sha256` (a file's bytes: weights files,
class-name files), :func:`text_sha256` (a text tower's tensors, whatever
the file), :func:`weights_sha256` (an image tower's tensors as saved),
:func:`rows_sha256` (embedding rows as float32), :func:`templates_sha256`
(prompt templates' strings: a sidecar's ``templates_sha256`` next to the
set's name ``templates``, compared with the set of that name by
:func:`check_prompt_recipe`).

**Checks** (every one is here; ``utils`` imports neither
:mod:`mmlocat.text` nor :mod:`mmlocat.datasets`, so what they know is
passed in): :func:`check_meta` (the meta's types and legacy keys),
:func:`check_sidecar_rows` (a sidecar's rows fingerprint),
:func:`check_prompt_recipe` (templates, their content, against the sets
the caller passes, and the prompt style), :func:`check_same_classes` (an
embedding file's classes and their order against the dataset's),
:func:`check_class_files` (the class-file record), :func:`check_text_weights`
(text weights found for a run-time vocabulary against the recorded CLIP),
:func:`check_same_clip` and :func:`check_clip_pairing` (the one rule below).

**Class-file record** (``meta['class_files']``): :func:`files_record`
lists each file a model read (a :class:`ClassFiles`, from
:func:`mmlocat.datasets.class_file_record.model_class_files`) with its
sha256 and its row names (:func:`file_record`); :class:`mmlocat.
RecordHook` writes it into every checkpoint. :func:`check_class_files`
(``tools/test.py``, ``tools/infer.py``) refuses a changed or reordered
file, naming both hashes and the classes that differ, unless the change
is allowed (:data:`ALLOW_OPTION`; on resume, :class:`mmlocat.RecordHook`,
never: :data:`RESUME_FIX`). A checkpoint without the record (trained
before it existed, or converted) is accepted with a one-line note;
``clipself_fvit2mmlocat.py`` records the embedding file it checked or
exported like training does, and without one its record of F-ViT's own
class embeddings (``meta['clipself_fvit']``: the rows' float32 sha256) is
compared with the file's rows.

**One rule** (:func:`check_clip_pairing`): a model pairing a CLIP tower
checkpoint with text embeddings refuses what it cannot prove: a tower
without ``meta['clip']``, a record with a name only, a record whose
``image_sha256`` is not the checkpoint's weights (copied from another
checkpoint), a sidecar without ``text_model`` or without ``rows_sha256``;
and a proven mismatch (:func:`check_same_clip`). The option that opts out
(``check_clip=False``; ``allow_mixed_clip=True`` for LaSt-CLIP) is logged
with what was not proven.

What makes text embeddings fit an image tower is the text tower: one CLIP
is released as several files (OpenAI's TorchScript ``ViT-B-16.pt`` and
open_clip's ``open_clip_pytorch_model.bin`` of it), whose file hashes
differ while their text towers are the same tensors.
:func:`check_same_clip` therefore compares ``text_sha256`` when both
records have it (equal: the same CLIP, whatever the files; different:
refused) and the text activation when both have it; records without a
fingerprint fall back to comparing ``name`` and the file ``sha256``.
"""
import copy
import hashlib
import json
import logging
import os
import os.path as osp
from typing import (Callable, Dict, List, Mapping, NamedTuple, Optional,
                    Sequence, Tuple)

import numpy as np
import torch
from mmengine.logging import print_log
from torch import Tensor

from .checkpoint_io import (read_checkpoint, read_clip_state_dict,
                            sniff_checkpoint, unwrap_state_dict)
from .safe_load import load_array

__all__ = [
    'RECORDS_VERSION', 'VERSION_KEY', 'CLIP_KEY', 'CLIP_RUN_KEY',
    'TEXT_TOWER_KEY', 'CLASS_FILES_KEY', 'CLIPSELF_KEY', 'LASTCLIP_KEY',
    'SOURCE_KEY', 'CONVERTER_KEY', 'META_SCHEMA', 'LEGACY_KEYS', 'check_meta',
    'file_sha256', 'read_checkpoint_meta', 'checkpoint_weights_sha256',
    'clip_meta', 'clip_provenance', 'check_same_clip', 'check_clip_pairing',
    'check_text_tower_pairing', 'check_text_weights', 'text_tower_tensors',
    'tensors_sha256', 'text_sha256', 'weights_sha256', 'rows_sha256',
    'templates_sha256', 'check_sidecar_rows', 'file_text_sha256',
    'text_provenance', 'NOT_TEXT_KEYS', 'TEXT_ACTS', 'check_prompt_recipe',
    'check_same_classes', 'ClassFiles', 'file_record', 'files_record',
    'check_class_files', 'ALLOW_OPTION', 'TEST_FIX', 'RESUME_FIX'
]

#: The version of the records' schema this module writes; a checkpoint
#: whose ``meta`` has no :data:`VERSION_KEY` was written before it (its
#: ``clip`` record has no ``image_sha256``).
RECORDS_VERSION = 2
#: ``meta`` key of the schema version.
VERSION_KEY = 'records_version'
#: ``meta`` key of an image tower's CLIP record (converters, the export).
CLIP_KEY = 'clip'
#: ``meta`` key of a LaSt-CLIP run's two towers' records (the hook).
CLIP_RUN_KEY = 'clip_provenance'
#: ``meta`` key that marks an exported text tower file.
TEXT_TOWER_KEY = 'open_clip_text'
#: ``meta`` key of the files a model read (the hook, F-ViT's converter).
CLASS_FILES_KEY = 'class_files'
#: ``meta`` key of a converted CLIPSelf F-ViT's class rows.
CLIPSELF_KEY = 'clipself_fvit'
#: ``meta`` key of an exported LaSt-CLIP tower's run.
LASTCLIP_KEY = 'lastclip'
#: ``meta`` keys of a converted file: the file read, the tool.
SOURCE_KEY = 'source'
CONVERTER_KEY = 'converter'
#: Every record key of a checkpoint's ``meta`` and its type.
META_SCHEMA: Dict[str, type] = {
    VERSION_KEY: int,
    CLIP_KEY: dict,
    CLIP_RUN_KEY: dict,
    TEXT_TOWER_KEY: dict,
    CLASS_FILES_KEY: dict,
    CLIPSELF_KEY: dict,
    LASTCLIP_KEY: dict,
    SOURCE_KEY: str,
    CONVERTER_KEY: str,
}
#: Keys earlier checkpoints were written with -> their key now: read
#: under either name, written under the new one (:func:`check_meta`).
LEGACY_KEYS: Dict[str, str] = {'vocabulary': CLASS_FILES_KEY}

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


def check_meta(meta: object, path: str) -> Dict:
    """A checkpoint's ``meta`` with every record key of its type, and
    its keys of :data:`LEGACY_KEYS` under their names now (a copy).

    Raises:
        ValueError: ``meta`` is not a dict, or a key of
            :data:`META_SCHEMA` holds another type; naming the file, the
            key, both types and the fix.
    """
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise ValueError(f'{path}: the checkpoint\'s meta is a '
                         f'{type(meta).__name__}, not a dict: write it '
                         'again with the tool that made it')
    meta = dict(meta)
    for old, new in LEGACY_KEYS.items():
        if old in meta and new not in meta:
            meta[new] = meta.pop(old)
    for key, kind in META_SCHEMA.items():
        value = meta.get(key)
        if value is not None and (not isinstance(value, kind)
                                  or isinstance(value, bool)):
            raise ValueError(
                f'{path}: meta[{key!r}] is a {type(value).__name__} '
                f'({str(value)[:60]!r}), not a {kind.__name__}: the record '
                'is not mmlocat\'s; convert the weights again '
                '(tools/model_converters/*2mmlocat.py write it)')
    return meta


_CHECKPOINTS: Dict[Tuple, Tuple[Dict, Optional[str]]] = {}


def _file_key(path: str) -> Tuple:
    stat = os.stat(path)
    return (osp.realpath(path), stat.st_size, stat.st_mtime_ns)


def _checkpoint_records(path: str) -> Tuple[Dict, Optional[str]]:
    """``(meta, weights_sha256 of its state dict)`` of a checkpoint file,
    read once per file (path, size, modification time) in this process."""
    if '://' in path:  # read (downloaded) when it is loaded, not here
        return {}, None
    key = _file_key(path) if osp.isfile(path) else None
    if key is not None and sniff_checkpoint(path) == 'torchscript':
        return {}, None  # OpenAI's CLIP archives: weights, no records
    if key is None or key not in _CHECKPOINTS:
        obj = read_checkpoint(path)
        meta = check_meta(
            obj.get('meta') if isinstance(obj, dict) else None, path)
        try:
            weights = weights_sha256(unwrap_state_dict(obj, path))
        except ValueError:  # no state dict of tensors: nothing to hash
            weights = None
        if key is None:
            return meta, weights
        _CHECKPOINTS[key] = (meta, weights)
    return _CHECKPOINTS[key]


def read_checkpoint_meta(path: str) -> Dict:
    """The ``meta`` dict of a checkpoint file (``{}`` for a file without
    one: a bare state dict, a safetensors file, an OpenAI TorchScript
    archive; and for an ``http(s)://``
    URL, which is downloaded when it is loaded, not to read its records),
    its record keys checked (:func:`check_meta`).

    The one reader of checkpoint meta, on the one reader of checkpoint
    files (:func:`~mmlocat.utils.checkpoint_io.read_checkpoint`: weights
    only); read once per file and process.

    Raises:
        FileNotFoundError: No such file.
        ValueError: Not a readable checkpoint, or a record of the wrong
            type; naming the file.
    """
    # a copy: the caller may change it, the cache must not
    return copy.deepcopy(_checkpoint_records(path)[0])


def checkpoint_weights_sha256(path: str) -> Optional[str]:
    """:func:`weights_sha256` of a checkpoint file's state dict (``None``
    when it holds none)."""
    return _checkpoint_records(path)[1]


def clip_meta(record: Mapping, state_dict: Mapping[str, Tensor]) -> Dict:
    """The ``meta`` entries of a converted CLIP tower: ``{'clip': record
    + image_sha256, 'records_version'}``, where ``image_sha256`` is
    :func:`weights_sha256` of ``state_dict`` with the keys as saved (the
    converters and the LaSt-CLIP export write it)."""
    record = dict(record)
    fingerprint = weights_sha256(state_dict)
    if fingerprint is not None:
        record['image_sha256'] = fingerprint
    return {CLIP_KEY: record, VERSION_KEY: RECORDS_VERSION}


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


def tensors_sha256(tensors: Mapping[str, Tensor]) -> str:
    """Content fingerprint of named tensors.

    The canonical form hashed (sha256), for each key in sorted order
    (Python string order): the key in UTF-8, a NUL byte, the shape as
    decimal sizes joined by ``,`` (empty for a scalar), a NUL byte, then
    the values as float32 little-endian bytes in row-major order. Files of
    the same weights give the same fingerprint whatever their format or
    storage dtype (an fp16 value is exact in float32).
    """
    digest = hashlib.sha256()
    for key in sorted(tensors):
        value = tensors[key].detach().to('cpu', torch.float32).contiguous()
        shape = ','.join(str(s) for s in value.shape)
        digest.update(f'{key}\0{shape}\0'.encode('utf-8'))
        digest.update(value.numpy().astype('<f4', copy=False).tobytes())
    return digest.hexdigest()


def text_sha256(state_dict: Mapping[str, Tensor]) -> Optional[str]:
    """Content fingerprint of the text tower in a CLIP state dict:
    :func:`tensors_sha256` of :func:`text_tower_tensors` (OpenAI's fp16
    archive and its fp32 open_clip copy give the same).

    Returns:
        The hex digest, or ``None`` when ``state_dict`` holds no text tower.
    """
    tensors = text_tower_tensors(state_dict)
    return tensors_sha256(tensors) if tensors else None


def weights_sha256(state_dict: Mapping[str, Tensor]) -> Optional[str]:
    """Content fingerprint of a converted tower's own weights, as saved
    (:func:`tensors_sha256` of its floating-point tensors; ``None`` for an
    empty state dict). A ``clip`` record holds it as ``image_sha256``, so
    a record copied into another checkpoint does not match its weights."""
    tensors = {
        k: v
        for k, v in state_dict.items()
        if isinstance(v, Tensor) and v.is_floating_point()
    }
    return tensors_sha256(tensors) if tensors else None


def rows_sha256(rows) -> str:
    """Hex sha256 of embedding rows (an array or a tensor) as float32,
    row-major, native byte order: the fingerprint of an embedding file's
    ``.npy`` in its sidecar and of a converted F-ViT's class rows."""
    if isinstance(rows, Tensor):
        rows = rows.detach().to('cpu', torch.float32).numpy()
    data = np.ascontiguousarray(np.asarray(rows, dtype=np.float32))
    return hashlib.sha256(data.tobytes()).hexdigest()


def templates_sha256(templates: Sequence[str]) -> str:
    """Hex sha256 of prompt templates' strings, in order (JSON list, UTF-8):
    recorded next to the template set's name (a sidecar's ``templates``) so
    that a set edited under the same name is told apart."""
    blob = json.dumps(list(templates), ensure_ascii=False)
    return hashlib.sha256(blob.encode('utf-8')).hexdigest()


def check_sidecar_rows(text_model: Mapping, rows: np.ndarray, path: str,
                       side: str) -> None:
    """Raise unless a sidecar's ``rows_sha256`` is its ``.npy``'s rows'.

    A sidecar without the fingerprint (written before it existed) is not
    checked here; :func:`check_clip_pairing` refuses it where a CLIP is
    paired with the rows.

    Raises:
        ValueError: Naming both files and both fingerprints: the sidecar
            was written for other rows (copied next to another ``.npy``).
    """
    recorded = text_model.get('rows_sha256')
    if recorded is None:
        return
    found = rows_sha256(rows)
    if found != recorded:
        raise ValueError(
            f'{side} belongs to other rows than {path}: it records '
            f'rows_sha256 {recorded}, the .npy holds {found} (a sidecar '
            'copied next to another embedding file?); write them together '
            '(tools/misc/dump_text_embeddings.py)')


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
    key = _file_key(path)
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


def check_text_weights(record: Dict, where: str, name: str,
                       weights: str) -> None:
    """Refuse text weights ``weights`` that are not the CLIP ``record``
    names (``record`` from ``where``: a sidecar or a checkpoint's
    ``meta['clip']``): its text tower's fingerprint where one is recorded
    (another file of the same weights is fine), else the file's sha256.
    Used where run-time vocabularies find their text tower."""
    expected = record.get('text_sha256')
    if expected:
        found = file_text_sha256(weights)
        if found != expected:
            held = (f'holds the text tower {found}'
                    if found else 'holds no CLIP text tower')
            raise ValueError(
                f'{weights} {held} but {where} records the text tower '
                f'{expected} (of {record.get("weights")}) for CLIP {name}: '
                "pass the text weights of the detector's CLIP")
        return
    expected = record.get('sha256')
    if expected and file_sha256(weights) != expected:
        raise ValueError(
            f'{weights} has sha256 {file_sha256(weights)} but {where} '
            f'records {expected} for CLIP {name}: pass the text weights of '
            "the detector's CLIP")


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


def _unproven(text_model: Mapping, image_model: Mapping, checkpoint: str,
              weights: Optional[str]) -> list:
    """What cannot be proven about pairing these two records (``weights``:
    :func:`weights_sha256` of the checkpoint's state dict)."""
    problems = []
    if not text_model:
        problems.append('the sidecar records no text model (a plain name '
                        'list, or written by another tool)')
    elif not (text_model.get('text_sha256') or text_model.get('sha256')):
        problems.append(
            f'the sidecar names the text model {text_model.get("name")!r} '
            'only (no weights sha256 or text-tower fingerprint)')
    if text_model and not text_model.get('rows_sha256'):
        problems.append('the sidecar does not fingerprint its rows '
                        '(rows_sha256: written before mmlocat recorded it)')
    if not image_model:
        problems.append(f"{checkpoint} records no CLIP (meta['clip'])")
        return problems
    if not (image_model.get('text_sha256') or image_model.get('sha256')):
        problems.append(
            f"{checkpoint} names the CLIP {image_model.get('name')!r} only "
            "in meta['clip'] (no weights sha256 or text-tower fingerprint)")
    recorded = image_model.get('image_sha256')
    if not recorded:
        problems.append(
            f"{checkpoint}'s meta['clip'] does not fingerprint the tower's "
            'own weights (image_sha256: converted before mmlocat recorded '
            'it)')
    elif weights != recorded:
        problems.append(
            f"{checkpoint}'s meta['clip'] records image_sha256 "
            f'{recorded} but its weights have {weights} (a record copied '
            'from another checkpoint?)')
    return problems


def check_clip_pairing(text_model: Mapping,
                       text_file: str,
                       checkpoint: str,
                       consumer: str,
                       opt_out: str,
                       allowed: bool = False,
                       logger='current',
                       loaded: Optional[Mapping] = None) -> None:
    """The one rule: a model pairing a CLIP tower checkpoint with text
    embeddings refuses a pairing it cannot prove, and a proven mismatch.

    Checked where the tower is named (the model's ``init_cfg``, at build)
    and where a checkpoint is loaded into the model (``loaded``: what
    ``tools/test.py`` or a host's ``load_from`` loaded), so a tower given
    to ``tools/test.py`` is checked, not only the config's.

    Not proven: the tower checkpoint records no CLIP, or a name only, or
    a record whose ``image_sha256`` is not its weights (copied), or none
    (:data:`RECORDS_VERSION` 1); the sidecar records no text model, a name
    only, or no ``rows_sha256``. Proven and different:
    :func:`check_same_clip`.

    Args:
        text_model: The sidecar's ``text_model`` record.
        text_file: The embedding file (for messages).
        checkpoint: The tower checkpoint (its ``meta['clip']`` is read).
        consumer: Who pairs them (for messages), e.g. ``'FViT'``.
        opt_out: The option that accepts the pairing unchecked, e.g.
            ``'check_clip=False'``.
        allowed: The config set ``opt_out``: nothing is refused, and what
            is not proven is logged as a warning.
        logger: Where the opt-out's warning goes.
        loaded: The checkpoint as loaded (a dict with ``meta`` and the
            state dict): its records and weights are read from it, and
            ``checkpoint`` only names it; None: read the file
            ``checkpoint``.

    Raises:
        ValueError: Naming both files, what is not proven (or differs) and
            the fixes, ``opt_out`` among them.
    """
    if allowed:
        print_log(
            f'{consumer}: {opt_out}: {text_file} is used with the tower '
            f'{checkpoint} without checking that they come from one CLIP',
            logger=logger,
            level=logging.WARNING)
        return
    if loaded is not None:
        meta = check_meta(loaded.get('meta'), checkpoint)
        weights = weights_sha256(unwrap_state_dict(loaded, checkpoint))
    elif '://' not in checkpoint and not osp.exists(checkpoint):
        return  # loading the weights names the missing file
    else:
        meta = read_checkpoint_meta(checkpoint)
        weights = checkpoint_weights_sha256(checkpoint)
    image_model = meta.get(CLIP_KEY) or {}
    problems = _unproven(text_model, image_model, checkpoint, weights)
    if problems:
        raise ValueError(
            f'{consumer} cannot prove that {text_file} and the tower '
            f'{checkpoint} come from one CLIP: ' + '; '.join(problems) +
            '. Convert the tower with tools/model_converters/'
            '*clip2mmlocat.py (they record it), dump the embeddings with '
            'tools/misc/dump_text_embeddings.py --pretrained (it records '
            f'the text tower and the rows), or set {opt_out} (logged)')
    check_same_clip(text_model, text_file, image_model, checkpoint)


def check_text_tower_pairing(text_model: Mapping,
                             text_file: str,
                             tower_fingerprint: str,
                             tower: str,
                             consumer: str,
                             opt_out: str,
                             allowed: bool = False,
                             logger='current') -> None:
    """The rule of :func:`check_clip_pairing` for a model that holds its
    own text tower (LaSt-CLIP, whose text tower is the one its
    embeddings must come from): the sidecar's recorded text-tower
    fingerprint must be that of the tower as evaluated.

    Args:
        text_model: The sidecar's ``text_model`` record.
        text_file: The embedding file (for messages).
        tower_fingerprint: :func:`text_sha256` of the evaluated model's
            text tower, with the weights it holds now (as loaded).
        tower: What holds that tower (for messages).
        consumer, opt_out, allowed, logger: As :func:`check_clip_pairing`.

    Raises:
        ValueError: The sidecar records no text-tower fingerprint, or
            another one; naming both and the fixes, ``opt_out`` among them.
    """
    if allowed:
        print_log(
            f'{consumer}: {opt_out}: {text_file} is used with the text '
            f'tower of {tower} without checking that it encoded them',
            logger=logger,
            level=logging.WARNING)
        return
    recorded = (text_model or {}).get('text_sha256')
    fix = ('dump the embeddings with tools/misc/dump_text_embeddings.py '
           '--pretrained and the text weights the model was trained with '
           f'(it records the tower), or set {opt_out} (logged)')
    if not recorded:
        raise ValueError(
            f'{consumer} cannot prove that {text_file} was encoded by the '
            f'text tower of {tower}: its sidecar records no text-tower '
            f'fingerprint (text_sha256): {fix}')
    if recorded != tower_fingerprint:
        raise ValueError(
            f'{text_file} was encoded by the text tower {recorded} but '
            f'{tower} holds the text tower {tower_fingerprint}: {fix}')


def check_prompt_recipe(
        text_model: Mapping, text_file: str, expected: Mapping[str,
                                                               Optional[str]],
        consumer: str, current_templates: Mapping[str, Sequence[str]]) -> None:
    """Raise if an embedding file was written with another prompt recipe
    than ``consumer`` names.

    Args:
        text_model: The sidecar's record (``templates``, ``prompt_style``).
        text_file: The embedding file (for the message).
        expected: ``{'templates': ..., 'prompt_style': ...}`` of the
            consumer; a ``None`` value accepts any.
        consumer: Who expects them (for the message), e.g. a model type.
        current_templates: The template sets as they are now, by name
            (:data:`mmlocat.text.templates.TEMPLATE_SETS`: the caller
            passes them, ``utils`` does not import ``text``).

    Each field is compared only when both sides have it. Where the
    templates' names are compared and the sidecar records the set's
    content (``templates_sha256``, :func:`templates_sha256`), it is
    compared with the set of that name in ``current_templates``: a set
    edited under the same name is refused.

    Raises:
        ValueError: Naming the file, both values and the dump option.
    """
    for key, want in expected.items():
        found = text_model.get(key)
        if want is not None and found is not None and found != want:
            option = '--' + key.replace('_', '-')
            raise ValueError(
                f'text embeddings {text_file} were written with {key} '
                f'{found!r} but {consumer} names {want!r}: dump them with '
                f'tools/misc/dump_text_embeddings.py {option} {want}, or set '
                f'{key}={found!r} (None accepts any)')
    recorded = text_model.get('templates_sha256')
    name = text_model.get('templates')
    if (expected.get('templates') is not None and recorded is not None
            and name in current_templates):
        now = templates_sha256(current_templates[name])
        if recorded != now:
            raise ValueError(
                f'text embeddings {text_file} were written with the '
                f'templates {name!r} of sha256 {recorded}, but the set of '
                f'that name is now {now} (its prompts changed): dump them '
                f'again (tools/misc/dump_text_embeddings.py --templates '
                f'{name})')


def _mismatch(got: List[str], want: List[str], path: str) -> str:
    if sorted(got) == sorted(want):
        first = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
        return (f'{path} has the dataset classes in a different order '
                f'(first difference at row {first}: {got[first]!r} vs '
                f'expected {want[first]!r}); it is not reordered silently: '
                'regenerate it with tools/misc/dump_text_embeddings.py')
    missing = [n for n in want if n not in got]
    extra = [n for n in got if n not in want]
    return (f'{path} lists {len(got)} classes, the dataset {len(want)}; '
            f'missing {missing[:10]}{"..." if len(missing) > 10 else ""}, '
            f'unexpected {extra[:10]}{"..." if len(extra) > 10 else ""}')


def check_same_classes(found: Sequence[str], expected: Sequence[str],
                       path: str) -> None:
    """Raise unless an embedding file's classes ``found`` are the dataset's
    ``expected`` ones in the same order (the message names the first
    difference, or what is missing and unexpected)."""
    if list(found) != list(expected):
        raise ValueError('text embeddings do not match the dataset classes: ' +
                         _mismatch(list(found), list(expected), path))


#: The command-line option that accepts changed class files
#: (``tools/test.py``, ``tools/infer.py``).
ALLOW_OPTION = '--allow-class-file-change'
#: What to do when the class files differ from the record (testing).
TEST_FIX = (f'Test with the files the checkpoint records, or pass '
            f'{ALLOW_OPTION} to evaluate with the new ones')
#: ... and when resuming training (``tools/train.py --resume``), where no
#: option accepts other files: the optimizer state and the checkpoints
#: kept belong to the recorded ones.
RESUME_FIX = ('Resume with the config and files the run started with, or '
              'start a new run with the new files (tools/train.py '
              '--overwrite, or another --work-dir; --cfg-options '
              'load_from=CHECKPOINT starts it from these weights)')


class ClassFiles(NamedTuple):
    """The class files a model read, as the dataset side knows them
    (:func:`mmlocat.datasets.class_file_record.model_class_files`):
    ``utils`` does not import ``text``, so how a file's row names are read
    comes with the files."""
    #: ``{'<submodule>.<role>': path}`` of the files read.
    files: Dict[str, str]
    #: ``(role, path) -> the names of the file's rows, in order``.
    row_names: Callable[[str, str], Sequence[str]]
    #: The row name of no class (F-ViT's background embedding).
    background: str


def file_record(path: str, names: Sequence[str]) -> Dict:
    """``{'file', 'sha256', 'names'}`` of one class file: its path, the
    sha256 of its bytes (:func:`file_sha256`; the ``.npy`` of an embedding
    file) and its row names (an embedding file's sidecar); a file differs
    from its record when either differs."""
    return dict(file=path, sha256=file_sha256(path), names=list(names))


def files_record(class_files: ClassFiles) -> Dict[str, Dict]:
    """``{role: file_record}`` (:func:`file_record`) of every file in
    ``class_files``, written as ``meta['class_files']``
    (:data:`CLASS_FILES_KEY`)."""
    return {
        role: file_record(path, class_files.row_names(role, path))
        for role, path in sorted(class_files.files.items())
    }


def _name_difference(now: List[str], then: List[str]) -> str:
    """How two row-name lists differ, in words."""
    if now == then:
        return ('the same names in the same order with other values '
                '(regenerated with another CLIP, prompts or weights?)')
    if sorted(now) == sorted(then):
        row = next(i for i, (a, b) in enumerate(zip(now, then)) if a != b)
        return (f'the same names in another order (first difference at row '
                f'{row}: {now[row]!r} now, {then[row]!r} in training)')
    added = [n for n in now if n not in then]
    missing = [n for n in then if n not in now]

    def short(names):
        return f'{names[:10]}{" ..." if len(names) > 10 else ""}'

    return (f'other names: {len(now)} now, {len(then)} in training; new '
            f'{short(added)}, gone {short(missing)}')


def _compare(role: str, now: Optional[Dict], then: Optional[Dict],
             checkpoint: str) -> Optional[str]:
    """The difference of one file from its record, or None."""
    if now is None:
        return (f'{checkpoint} records {role} {then["file"]} (sha256 '
                f'{then["sha256"]}) but the model reads none now')
    if then is None:
        return (f'the model reads {role} {now["file"]} (sha256 '
                f'{now["sha256"]}), which {checkpoint} does not record')
    names_now, names_then = list(now['names']), list(then['names'])
    if now['sha256'] == then['sha256'] and names_now == names_then:
        return None
    difference = _name_difference(names_now, names_then)
    if now['sha256'] == then['sha256']:  # the sidecar names the rows anew
        difference = 'the same rows, named differently: ' + difference
    return (f'{checkpoint} records {role} {then["file"]} (sha256 '
            f'{then["sha256"]}) but the model reads {now["file"]} (sha256 '
            f'{now["sha256"]}): {difference}')


def _file_rows_sha256(path: str) -> str:
    """:func:`rows_sha256` of an embedding file's rows (how
    ``clipself_fvit2mmlocat.py`` records the checkpoint's)."""
    return rows_sha256(load_array(path))


def _compare_clipself(class_files: ClassFiles, record: Dict,
                      checkpoint: str) -> List[str]:
    """Differences of the text-embedding files from the class embeddings
    a converted CLIPSelf F-ViT checkpoint stored."""
    stored = record.get('class_embeddings') or {}
    problems = []
    for role, path in sorted(class_files.files.items()):
        if role.split('.')[-1] != 'text_embeddings' or not stored:
            continue
        found = _file_rows_sha256(path)
        if found == stored.get('sha256'):
            continue
        detail = ''
        classes = record.get('classes')
        if classes:
            names = [
                n for n in class_files.row_names(role, path)
                if n != class_files.background
            ]
            detail = ': ' + _name_difference(names, list(classes))
        problems.append(
            f'{checkpoint} was converted from an F-ViT checkpoint whose '
            f'class embeddings {stored.get("shape")} have sha256 '
            f'{stored.get("sha256")} (rows as float32) but the model reads '
            f'{role} {path} whose rows have sha256 {found}{detail}')
    return problems


def check_class_files(class_files: ClassFiles,
                      checkpoint: str,
                      allow_change: bool = False,
                      logger=None,
                      meta: Optional[Dict] = None,
                      fix: str = TEST_FIX) -> List[str]:
    """Compare the class files a model read with ``checkpoint``'s record.

    Args:
        class_files: The files the built model read (read now), from
            :func:`mmlocat.datasets.class_file_record.model_class_files`.
        checkpoint: The checkpoint it will run with.
        allow_change: Only warn about differences (:data:`ALLOW_OPTION`).
        logger: Where notes and warnings go (default: the current logger).
        meta: ``checkpoint``'s ``meta`` when the caller has read it
            (:func:`mmlocat.utils.pretrained.load_model_weights`); by
            default it is read from the file (either way its legacy keys
            are read, :func:`check_meta`).
        fix: What the error tells the user to do (:data:`TEST_FIX`;
            :data:`RESUME_FIX` on resume).

    Returns:
        The differences found (empty when the files are the recorded ones,
        or nothing can be compared).

    Raises:
        ValueError: A file differs from the record (without
            ``allow_change``): each difference names the role, both files,
            both hashes and how the names differ.
    """
    logger = logger or 'current'
    files = class_files.files
    if not files:
        return []
    if meta is None:
        meta = (
            read_checkpoint_meta(checkpoint) if osp.isfile(checkpoint) else {})
    meta = check_meta(meta, checkpoint)
    recorded = meta.get(CLASS_FILES_KEY)
    if recorded is None and isinstance(meta.get(CLIPSELF_KEY), dict):
        problems = _compare_clipself(class_files, meta[CLIPSELF_KEY],
                                     checkpoint)
    elif recorded is None:
        print_log(
            f'class files: {checkpoint} records no class files (trained '
            'before mmlocat recorded it, or converted): '
            f'{", ".join(sorted(files.values()))} used as given',
            logger=logger)
        return []
    else:
        now = files_record(class_files)
        roles = set(now) | set(recorded)
        if meta.get(CONVERTER_KEY):
            # a converter records only the files it saw (the class
            # embeddings); the others are the config's, used as given
            for role in sorted(set(now) - set(recorded)):
                print_log(
                    f'class files: {checkpoint} (converted by '
                    f'{meta[CONVERTER_KEY]}) records no {role}: '
                    f'{now[role]["file"]} used as given',
                    logger=logger)
            roles = set(recorded)
        problems = [
            p for p in (
                _compare(role, now.get(role), recorded.get(role), checkpoint)
                for role in sorted(roles)) if p is not None
        ]
    if problems and not allow_change:
        raise ValueError('the class files are not the checkpoint\'s: ' +
                         '; '.join(problems) + f'. {fix}')
    for problem in problems:
        print_log(
            f'class files changed ({ALLOW_OPTION}): {problem}',
            logger=logger,
            level=logging.WARNING)
    return problems
