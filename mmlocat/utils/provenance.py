"""Where converted weights and text embeddings came from.

A CLIP image tower (converted by ``tools/model_converters/clip2mmlocat.py``
or ``eva02_clip2mmlocat.py``) and the class text embeddings of an F-ViT head
(``tools/misc/dump_text_embeddings.py``) must come from the same CLIP. Both
tools record the open_clip model ``name`` and the ``sha256`` of the weights
file they read: the converter in the checkpoint's ``meta['clip']``, the
embedding tool in the sidecar's ``text_model``. :func:`check_same_clip`
compares the two wherever both are known (:func:`check_checkpoint_clip`
reads the checkpoint's record first). The sidecar also records the prompt
recipe (``templates``, ``prompt_style``); :func:`check_prompt_recipe`
compares it with the one a consumer's config names.
"""
import hashlib
import os.path as osp
from typing import Dict, Optional

import torch

from .safe_load import mmengine_checkpoint_globals

__all__ = [
    'file_sha256', 'read_checkpoint_meta', 'clip_provenance',
    'check_same_clip', 'check_checkpoint_clip', 'check_prompt_recipe'
]


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
        with mmengine_checkpoint_globals():
            obj = torch.load(
                path, map_location='cpu', mmap=True, weights_only=True)
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


EMBEDDINGS_HINT = ('dump the embeddings with the text tower of the same CLIP '
                   '(tools/misc/dump_text_embeddings.py --model / '
                   '--pretrained)')


def check_same_clip(text_model: Dict,
                    text_file: str,
                    image_model: Dict,
                    image_file: str,
                    text_kind: str = 'text embeddings',
                    image_kind: str = 'the backbone checkpoint',
                    hint: str = EMBEDDINGS_HINT) -> None:
    """Raise if two provenance records name different CLIPs.

    Each field (``name``, ``sha256``) is compared only when both records
    have it.

    Args:
        text_model, image_model: The two records.
        text_file, image_file: Where they were read (for the message).
        text_kind, image_kind: What the two files are (for the message).
        hint: How to fix it (the end of the message).

    Raises:
        ValueError: Naming both files and the differing values.
    """
    for key in ('name', 'sha256'):
        found, expected = text_model.get(key), image_model.get(key)
        if found is not None and expected is not None and found != expected:
            raise ValueError(
                f'{text_kind} {text_file} come from CLIP {key} {found!r} '
                f'but {image_kind} {image_file} from {expected!r}; {hint}')


def check_checkpoint_clip(text_model: Dict, text_file: str,
                          checkpoint: str) -> None:
    """:func:`check_same_clip` against the ``meta['clip']`` record of an
    image-tower checkpoint (nothing to compare when it records none)."""
    image_model = read_checkpoint_meta(checkpoint).get('clip', {})
    check_same_clip(text_model, text_file, image_model, checkpoint)


def check_prompt_recipe(text_model: Dict, text_file: str,
                        expected: Dict[str,
                                       Optional[str]], consumer: str) -> None:
    """Raise if an embedding file was written with another prompt recipe
    than ``consumer`` names.

    Args:
        text_model: The sidecar's record (``templates``, ``prompt_style``).
        text_file: The embedding file (for the message).
        expected: ``{'templates': ..., 'prompt_style': ...}`` of the
            consumer; a ``None`` value accepts any.
        consumer: Who expects them (for the message), e.g. a model type.

    Each field is compared only when both sides have it.

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
