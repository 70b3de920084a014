"""Class text embeddings for open-vocabulary heads: build, save, load.

The recipe is CLIP's zero-shot classifier ("Learning Transferable Visual
Models From Natural Language Supervision", https://arxiv.org/abs/2103.00020)
as used by F-ViT (CLIPSelf, https://arxiv.org/abs/2310.01403): each class
name is put into prompt templates, every prompt is encoded and
L2-normalised, the prompts of a class are averaged and the mean is
normalised again.

On disk an embedding file is a ``(R, D)`` float ``.npy`` plus a sidecar
``.json`` (same stem), of one shape: a JSON object. With one row per class
(``R = C``) it holds the ``C`` class names, row by row, ``{"classes":
[...]}``, and, when known, ``"text_model": {...}``, which records the text
tower that
wrote it (open_clip ``name``, ``weights`` file and its ``sha256``, the
``templates`` and ``prompt_style``) so that a consumer can refuse
embeddings of another CLIP or prompt recipe. An optional last row named
``'background'`` is F-ViT's background embedding. Sidecars written before
(a plain list of the class names, without ``text_model``) are read as
``{"classes": list}`` (:func:`read_sidecar`).

Zero-shot segmentation as SCLIP evaluates it
(https://github.com/wangf3014/SCLIP, ``clip_segmentor.py``) gives a class
several names (synonyms): a class-name file line ``person, person in
shirt, ...`` is one class. Such a file has one row per *query name* and
its sidecar maps each row to its class: ``{"classes": [C names],
"queries": [R names], "query_class": [R class indices], "text_model":
...}`` (:func:`load_query_embeddings`). :func:`load_text_embeddings` (F-ViT
and other one-row-per-class consumers) reads the class list and refuses a
file whose rows are not one per class.
Both check the classes and their order against the dataset's and never
reorder silently.
"""
import json
import os
import os.path as osp
import sys
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
from tqdm import tqdm

from mmlocat.utils.checkpoint_io import write_atomic
from mmlocat.utils.records import (check_same_classes, check_sidecar_rows,
                                   rows_sha256, templates_sha256)
from mmlocat.utils.safe_load import load_array
from .class_names import BACKGROUND, read_class_names, read_json
from .templates import (IMAGENET_TEMPLATES, PROMPT_TEMPLATES, TEMPLATE_SETS,
                        check_templates, class_prompts)

__all__ = [
    'Encoder', 'sidecar_path', 'embed_names', 'build_class_embeddings',
    'build_query_embeddings', 'query_map', 'save_text_embeddings',
    'write_text_embeddings', 'read_text_model', 'read_sidecar',
    'QueryEmbeddings', 'load_query_embeddings', 'load_text_embeddings',
    'read_clipself_embeddings', 'save_base_classes', 'base_classes_path',
    'embedding_files'
]

#: Prompts -> ``(N, D)`` features (an array or a tensor).
Encoder = Callable[[List[str]], object]


def sidecar_path(npy_path: str) -> str:
    """The class-name list next to an embedding file: ``x.npy`` -> ``x.json``.
    """
    if not npy_path.endswith('.npy'):
        raise ValueError(f'text embeddings must be a .npy file: {npy_path}')
    return npy_path[:-len('.npy')] + '.json'


def read_sidecar(side: str) -> Dict:
    """A sidecar's content in its one shape, ``{"classes": [...], ...}``:
    the former shape, a plain list of the class names, is converted.

    Raises:
        ValueError: Not JSON (a truncated or broken file: the line where
            it stops), or neither an object nor a list; naming the file
            and the fix.
    """
    fix = ('an embedding file and its sidecar are written together: write '
           'them again (tools/misc/dump_text_embeddings.py)')
    content = read_json(side, fix)
    if isinstance(content, list):  # the former shape: the class names
        return dict(classes=content)
    if not isinstance(content, dict):
        raise ValueError(f'{side} holds a {type(content).__name__}, not a '
                         f'sidecar ({{"classes": [...], ...}}); {fix}')
    return content


def _normalize(x: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(x, axis=-1, keepdims=True)
    if not np.all(np.isfinite(x)) or np.any(norm == 0):
        raise ValueError('embeddings must be finite and non-zero')
    return x / norm


def embed_names(names: Sequence[str], encode_text_fn: Encoder,
                templates: Sequence[str], prompt_style: str) -> np.ndarray:
    """``(N, D)`` float32 prompt-ensembled rows of ``names``, row ``k``
    the embedding of ``names[k]``; a name given twice is encoded once
    (its rows are identical: ImageNet's lists name two classes twice, and
    open_clip embeds them alike)."""
    check_templates(templates, prompt_style)
    done: Dict[str, np.ndarray] = {}
    todo = list(dict.fromkeys(names))
    # a CPU text tower takes seconds per class: a bar with an ETA on stderr
    for name in tqdm(
            todo,
            desc='text embeddings',
            unit='class',
            file=sys.stderr,
            disable=False,
            dynamic_ncols=True):
        prompts = class_prompts(name, templates, prompt_style)
        feats = encode_text_fn(prompts)
        if hasattr(feats, 'detach'):  # torch tensor
            feats = feats.detach().float().cpu().numpy()
        feats = np.asarray(feats, dtype=np.float64)
        if feats.ndim != 2 or feats.shape[0] != len(prompts):
            raise ValueError(f'encode_text_fn returned shape {feats.shape} '
                             f'for {len(prompts)} prompts')
        done[name] = _normalize(_normalize(feats).mean(axis=0))
    return np.stack([done[n] for n in names]).astype(np.float32)


def build_class_embeddings(
        class_names: Sequence[str],
        encode_text_fn: Encoder,
        templates: Sequence[str] = PROMPT_TEMPLATES,
        background: bool = False,
        prompt_style: str = 'fvit') -> Tuple[np.ndarray, List[str]]:
    """Prompt-ensembled, L2-normalised text embeddings of ``class_names``.

    Args:
        class_names: Names in the dataset's label order.
        encode_text_fn: Maps a list of prompts to a ``(N, D)`` array or
            tensor of text features (e.g. open_clip's tokenizer followed by
            ``model.encode_text``).
        templates: Prompt templates, each with one ``'{}'`` (F-ViT's 63 by
            default).
        background: Append a ``'background'`` row (the prompts filled with
            the word "background").
        prompt_style: ``'fvit'`` (F-ViT's name processing, articles and
            "This is " prefix, :func:`fvit_prompts`) or ``'plain'``
            (:func:`plain_prompts`).

    Returns:
        ``(embeddings (C[+1], D) float32, names)``.
    """
    if not class_names:
        raise ValueError('class_names must not be empty')
    if len(set(class_names)) != len(class_names):
        raise ValueError('class_names has duplicates')
    names = list(class_names) + ([BACKGROUND] if background else [])
    return embed_names(names, encode_text_fn, templates, prompt_style), names


def build_query_embeddings(
        lines: Sequence[Sequence[str]],
        encode_text_fn: Encoder,
        templates: Sequence[str] = IMAGENET_TEMPLATES,
        prompt_style: str = 'plain'
) -> Tuple[np.ndarray, List[str], List[int]]:
    """One prompt-ensembled row per query name of a class-name file.

    SCLIP's text classifier (``clip_segmentor.py``): every name of every
    line is a query; each is put into the templates, encoded, each prompt
    L2-normalised, averaged and normalised again (as
    :func:`build_class_embeddings`).

    Args:
        lines: :func:`read_class_name_file`'s output (class ``k``'s names).
        encode_text_fn: Prompts -> ``(N, D)`` features.
        templates: Prompt templates (CLIP's 80 ImageNet ones by default,
            SCLIP's ``openai_imagenet_template``).
        prompt_style: ``'plain'`` (SCLIP's) or ``'fvit'``.

    Returns:
        ``(embeddings (Q, D) float32, query names, class index of each)``.
    """
    queries, query_class = query_map(lines)
    return (embed_names(queries, encode_text_fn, templates,
                        prompt_style), queries, query_class)


def query_map(lines: Sequence[Sequence[str]]) -> Tuple[List[str], List[int]]:
    """``(query names, class index of each)`` of a class-name file's lines
    (the rows and the row-to-class map of its embedding file)."""
    if not lines or not all(lines):
        raise ValueError('every class needs at least one name')
    queries = [n for names in lines for n in names]
    query_class = [k for k, names in enumerate(lines) for _ in names]
    return queries, query_class


def save_text_embeddings(path: str,
                         embeddings: np.ndarray,
                         names: Sequence[str],
                         text_model: Optional[Dict] = None,
                         query_class: Optional[Sequence[int]] = None,
                         classes: Optional[Sequence[str]] = None) -> str:
    """Write ``path`` (``.npy``) and its class-name sidecar; returns it.

    Args:
        path: Output ``.npy`` file.
        embeddings: ``(R, D)`` rows.
        names: The ``R`` row names: the classes, or with ``query_class``
            the query names.
        text_model: Provenance of the text tower (e.g. ``name``,
            ``weights``, ``sha256`` of the weights file, ``templates``,
            ``prompt_style``), stored as the sidecar's ``text_model``
            (plus ``rows_sha256``, the rows' fingerprint,
            :func:`mmlocat.utils.records.rows_sha256`); the sidecar is
            ``{"classes": names}`` with or without it.
        query_class: The class index of each row (rows are query names,
            several per class): the sidecar then holds ``classes``,
            ``queries`` and ``query_class`` (see the module docstring).
        classes: The class names, with ``query_class`` only.
    """
    embeddings = np.asarray(embeddings, dtype=np.float32)
    if embeddings.ndim != 2 or embeddings.shape[0] != len(names):
        raise ValueError(f'{embeddings.shape} embeddings for {len(names)} '
                         'names')
    if (query_class is None) != (classes is None):
        raise ValueError('query_class and classes go together')
    if query_class is not None:
        _check_query_map(list(query_class), len(names), len(classes), path)
    side = sidecar_path(path)
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    content = dict(classes=list(names))  # the one shape (read_sidecar)
    if query_class is not None:
        content = dict(
            classes=list(classes),
            queries=list(names),
            query_class=[int(k) for k in query_class])
    if text_model is not None:
        # binds the sidecar to these rows (mmlocat.utils.records)
        content['text_model'] = dict(
            text_model, rows_sha256=rows_sha256(embeddings))
    # each file complete or unchanged (a killed write leaves a temporary
    # that the next write of the file removes): write_atomic
    write_atomic(side, lambda f: f.write(_json_bytes(content)))
    write_atomic(path, lambda f: np.save(f, embeddings))
    return path


def _json_bytes(content) -> bytes:
    return json.dumps(content, indent=0).encode('utf-8')


def write_text_embeddings(
        path: str,
        classes: Sequence[str],
        encode: Encoder,
        text_model: Dict,
        templates: str = 'fvit',
        prompt_style: str = 'fvit',
        background: bool = False,
        class_name_lines: Optional[Sequence[Sequence[str]]] = None,
        repeated_names: bool = False) -> Tuple[np.ndarray, List[str]]:
    """Build the text embeddings of ``classes`` and write them with their
    sidecar: the one build-and-save step (``dump_text_embeddings.py``, the
    run-time vocabulary cache).

    Args:
        path: Output ``.npy`` file; it and its sidecar are written
            atomically (a reader never sees half a file).
        classes: The class names in label order.
        encode: Prompts -> ``(N, D)`` features (e.g.
            :class:`~mmlocat.text.encoder.TextEncoder`).
        text_model: The text tower's record (``encoder_record``), stored
            in the sidecar with ``templates`` and ``prompt_style``.
        templates: A key of :data:`~mmlocat.text.templates.TEMPLATE_SETS`.
        prompt_style: ``'fvit'`` or ``'plain'``.
        background: Append F-ViT's ``'background'`` row.
        class_name_lines: The names (synonyms) of each class
            (:func:`~mmlocat.text.class_names.read_class_name_file`): one
            row per name and the row-to-class map in the sidecar.
        repeated_names: ``classes`` may name a class twice (ImageNet's
            lists): those rows are equal.

    Returns:
        ``(embeddings (R, D) float32, row names)``.
    """
    sidecar_path(path)  # a .npy path, before anything is encoded
    if templates not in TEMPLATE_SETS:
        raise ValueError(f'templates must be one of {sorted(TEMPLATE_SETS)}, '
                         f'got {templates!r}')
    if background and (repeated_names or class_name_lines is not None):
        raise ValueError('a background row goes with one row per distinct '
                         'class only')
    template_set = TEMPLATE_SETS[templates]
    row_map = {}
    if class_name_lines is not None:
        embeddings, rows, query_class = build_query_embeddings(
            class_name_lines, encode, template_set, prompt_style)
        row_map = dict(query_class=query_class, classes=list(classes))
    elif repeated_names:
        embeddings = embed_names(classes, encode, template_set, prompt_style)
        rows = list(classes)
    else:
        embeddings, rows = build_class_embeddings(
            classes,
            encode,
            templates=template_set,
            background=background,
            prompt_style=prompt_style)
    text_model = dict(
        text_model,
        templates=templates,
        # the set's content next to its name (records.templates_sha256)
        templates_sha256=templates_sha256(template_set),
        prompt_style=prompt_style)
    save_text_embeddings(
        path, embeddings, rows, text_model=text_model, **row_map)
    return embeddings, rows


def read_text_model(path: str) -> Dict:
    """The text-model provenance recorded in an embedding file's sidecar
    (``{}`` when the sidecar is a plain name list)."""
    side = sidecar_path(path)
    if not osp.isfile(side):
        raise FileNotFoundError(f'class-name sidecar not found: {side}')
    return dict(read_sidecar(side).get('text_model') or {})


def _check_query_map(query_class: List[int], rows: int, num_classes: int,
                     where: str) -> None:
    if len(query_class) != rows:
        raise ValueError(f'{where}: {len(query_class)} query_class entries '
                         f'for {rows} rows')
    bad = [
        k for k in query_class if not isinstance(k, int)
        or isinstance(k, bool) or not 0 <= k < num_classes
    ]
    if bad:
        raise ValueError(f'{where}: query_class holds {bad[:5]}, not class '
                         f'indices in [0, {num_classes})')
    empty = sorted(set(range(num_classes)) - set(query_class))
    if empty:
        raise ValueError(f'{where}: classes {empty[:10]} have no query row')


class QueryEmbeddings(NamedTuple):
    """An embedding file read by :func:`load_query_embeddings`."""
    embeddings: np.ndarray  # (R, D) float32, unit rows
    query_class: List[int]  # the class index of each row
    classes: List[str]  # the C class names in label order
    queries: List[str]  # the R row names
    has_query_map: bool  # the sidecar maps rows to classes


def load_query_embeddings(
        path: str,
        class_names: Optional[Sequence[str]] = None) -> QueryEmbeddings:
    """Load an embedding file with its row-to-class map.

    A sidecar without a map (one row per class, as F-ViT's files) reads as
    queries = classes.

    Args:
        path: ``.npy`` file with its ``.json`` sidecar.
        class_names: The dataset's classes in label order; None skips the
            check.

    Raises:
        ValueError: A malformed map, wrong shape, non-finite values, or
            classes that differ from ``class_names`` in content, count or
            order.
    """
    if not osp.isfile(path):
        raise FileNotFoundError(f'text embedding file not found: {path}')
    side = sidecar_path(path)
    if not osp.isfile(side):
        raise FileNotFoundError(f'class-name sidecar not found: {side}')
    content = read_sidecar(side)
    has_map = 'queries' in content or 'query_class' in content
    classes = read_class_names(side)
    if has_map:
        queries, query_class = content.get('queries'), content.get(
            'query_class')
        if not isinstance(queries, list) or not isinstance(query_class, list):
            raise ValueError(f'{side} must hold both "queries" and '
                             '"query_class" lists (the row-to-class map)')
        if not all(isinstance(q, str) for q in queries):
            raise ValueError(f'{side}: "queries" must be strings')
    else:
        queries, query_class = list(classes), list(range(len(classes)))
    emb = load_array(path)
    text_model = content.get('text_model') or {}
    if not isinstance(text_model, dict):
        raise ValueError(f'{side}: "text_model" must be a record (a '
                         'dict); write the file again '
                         '(tools/misc/dump_text_embeddings.py)')
    check_sidecar_rows(text_model, emb, path, side)
    if emb.ndim != 2 or emb.shape[0] != len(queries):
        raise ValueError(f'{path} has shape {emb.shape} but {side} lists '
                         f'{len(queries)} ' +
                         ('queries' if has_map else 'names'))
    _check_query_map(query_class, len(queries), len(classes), side)
    # a row that cannot be a direction: name it (normalising would only
    # say "non-zero")
    finite = np.isfinite(emb).all(axis=1)
    zero = ~np.any(emb != 0, axis=1)
    for bad, what in ((~finite, 'holds NaN or infinite values'),
                      (zero, 'is all zeros')):
        rows = np.flatnonzero(bad)
        if rows.size:
            k = int(rows[0])
            name = queries[k]
            owner = classes[query_class[k]]
            of = '' if name == owner else f' of class {owner!r}'
            raise ValueError(
                f'{path}: row {k} ({name!r}{of}) {what}'
                f'{f" ({rows.size} such rows)" if rows.size > 1 else ""}; '
                'write the file again (tools/misc/dump_text_embeddings.py)')
    if class_names is not None:
        check_same_classes(classes, class_names, path)
    return QueryEmbeddings(
        _normalize(emb.astype(np.float32)), list(query_class), list(classes),
        list(queries), has_map)


def load_text_embeddings(
    path: str,
    class_names: Optional[Sequence[str]] = None
) -> Tuple[np.ndarray, Optional[np.ndarray], List[str]]:
    """Load and validate an embedding file against the dataset classes.

    Args:
        path: ``(C[+1], D)`` ``.npy`` file with its ``.json`` sidecar.
        class_names: The dataset's classes in label order; None skips the
            name check (the sidecar must still match the rows).

    Returns:
        ``(class_embeddings (C, D), background (D,) or None, names)``, both
        L2-normalised, float32.

    Raises:
        ValueError: Wrong shape, non-finite values, or names that differ
            from ``class_names`` in content, count or order.
    """
    table = load_query_embeddings(path)
    emb, names = table.embeddings, table.classes
    if table.query_class != list(range(len(names))):
        raise ValueError(
            f'{path} holds {len(table.queries)} query rows for {len(names)} '
            f'classes (several names per class, mapped in '
            f'{sidecar_path(path)}); this consumer needs one row per class: '
            'dump it with one name per class (tools/misc/'
            'dump_text_embeddings.py --names / --ann-file)')
    background = None
    if names and names[-1] == BACKGROUND and (class_names is None or BACKGROUND
                                              not in class_names):
        background, emb, names = emb[-1], emb[:-1], names[:-1]
    if class_names is not None:
        check_same_classes(names, class_names, path)
    emb = _normalize(emb.astype(np.float32))
    if background is not None:
        background = _normalize(background.astype(np.float32))
    return emb, background, list(names)


def read_clipself_embeddings(
        path: str,
        class_names: Sequence[str],
        names_source: str = 'the class names',
        background: bool = True) -> Tuple[np.ndarray, List[str]]:
    """Rows of a CLIPSelf F-ViT embedding file for ``class_names``.

    CLIPSelf's F-ViT (https://arxiv.org/abs/2310.01403, github
    wusize/CLIPSelf ``F-ViT/datasets/embeddings/*.pt``) ships its text
    embeddings as a ``torch.save``'d dict ``{class name: (D,) tensor}``
    (e.g. COCO's 80 classes plus ``'background'``); its box head takes the
    rows of the names in its class json (``mscoco_65_classes.json``,
    ``lvis_v1_all_classes.json``), in that order, then ``'background'``.
    This reads them the same way, for :func:`save_text_embeddings`.

    Args:
        path: The ``.pt`` file.
        class_names: The classes, in label order.
        names_source: Where ``class_names`` come from, for messages.
        background: Append the ``'background'`` row (F-ViT's head needs
            it).

    Returns:
        ``(rows (C[+1], D) float32, names)`` with ``'background'`` last.

    Raises:
        ValueError: Not such a dict, rows of different widths, or a class
            (or the background) without a row; names both sources.
    """
    # torch is needed by this format only
    from mmlocat.utils.checkpoint_io import read_checkpoint
    table = read_checkpoint(path)
    if (not isinstance(table, dict) or not table or not all(
            isinstance(k, str) and getattr(v, 'ndim', None) == 1
            for k, v in table.items())):
        found = type(table).__name__
        if isinstance(table, dict):
            found = f'a dict with keys {list(table)[:5]}'
        raise ValueError(
            f'{path} is not a CLIPSelf embedding file (a dict of class name '
            f'-> 1-D tensor); found {found}')
    widths = {int(v.shape[0]) for v in table.values()}
    if len(widths) != 1:
        raise ValueError(f'{path} holds rows of widths {sorted(widths)}')
    names = list(class_names) + ([BACKGROUND] if background else [])
    if len(set(names)) != len(names):
        raise ValueError(f'{names_source} has duplicate class names')
    missing = [n for n in names if n not in table]
    if missing:
        raise ValueError(
            f'{path} has no row for {len(missing)} of the {len(names)} '
            f'classes of {names_source}: {missing[:10]}'
            f'{"..." if len(missing) > 10 else ""} (it holds {len(table)}: '
            f'{list(table)[:5]}...)')
    rows = np.stack([table[n].float().numpy() for n in names])
    if not np.all(np.isfinite(rows)):
        raise ValueError(f'{path} holds NaN or infinite values')
    return rows.astype(np.float32), names


def base_classes_path(npy_path: str) -> str:
    """The base-class list next to an embedding file: ``X.npy`` ->
    ``X.base.json``."""
    return osp.splitext(npy_path)[0] + '.base.json'


def embedding_files(npy_path: str,
                    role: str,
                    base: bool = False) -> Dict[str, str]:
    """``{role: path}`` of the files an embedding file ``X.npy`` is: itself,
    its sidecar ``X.json`` and (with ``base``) ``X.base.json``; for
    :func:`mmlocat.utils.output_guard.refuse_output_over_input`. A path
    that is not a ``.npy`` is itself alone (refused later, by name)."""
    files = {role: npy_path}
    if npy_path.endswith('.npy'):
        files[f'{role} (its sidecar)'] = sidecar_path(npy_path)
        if base:
            files[f'{role} (its base classes)'] = base_classes_path(npy_path)
    return files


def save_base_classes(npy_path: str, base: Sequence[str]) -> str:
    """Write the base classes next to an embedding file: ``X.npy`` ->
    ``X.base.json`` (a name list, read as ``base_class_names``)."""
    path = base_classes_path(npy_path)
    write_atomic(path, lambda f: f.write(_json_bytes(list(base))))
    return path
