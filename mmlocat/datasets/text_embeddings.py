"""Class text embeddings for open-vocabulary heads: build, save, load.

The recipe is CLIP's zero-shot classifier ("Learning Transferable Visual
Models From Natural Language Supervision", https://arxiv.org/abs/2103.00020)
as used by F-ViT (CLIPSelf, https://arxiv.org/abs/2310.01403): each class
name is put into prompt templates, every prompt is encoded and
L2-normalised, the prompts of a class are averaged and the mean is
normalised again.

On disk an embedding file is a ``(R, D)`` float ``.npy`` plus a sidecar
``.json`` (same stem). With one row per class (``R = C``) the sidecar holds
the ``C`` class names, row by row: a plain list, or ``{"classes": [...],
"text_model": {...}}`` where ``text_model`` records the text tower that
wrote it (open_clip ``name``, ``weights`` file and its ``sha256``, the
``templates`` and ``prompt_style``) so that a consumer can refuse
embeddings of another CLIP or prompt recipe. An optional last row named
``'background'`` is F-ViT's background embedding.

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
from typing import (Callable, Dict, List, NamedTuple, Optional, Sequence,
                    Tuple, Union)

import numpy as np

from .ov_coco import split_base_names

__all__ = [
    'PROMPT_TEMPLATES', 'FVIT_TEMPLATES', 'CLIP_TEMPLATES',
    'IMAGENET_TEMPLATES', 'SINGLE_TEMPLATE', 'TEMPLATE_SETS', 'BACKGROUND',
    'sidecar_path', 'fvit_prompts', 'plain_prompts', 'build_class_embeddings',
    'save_text_embeddings', 'load_text_embeddings', 'read_class_names',
    'read_text_model', 'resolve_class_names', 'names_from_annotations',
    'config_class_names', 'read_clipself_embeddings', 'save_base_classes',
    'CLASS_NAME_SEPARATOR', 'read_class_name_file', 'check_class_name_lines',
    'build_query_embeddings', 'QueryEmbeddings', 'load_query_embeddings',
    'config_class_name_lines', 'check_same_classes', 'query_map'
]

BACKGROUND = 'background'

# CLIP's ImageNet-style prompt set (63 templates); the prompt style of
# ``prompt_style='plain'``. Each must contain exactly one '{}'.
CLIP_TEMPLATES = (
    'a bad photo of a {}.', 'a photo of many {}.', 'a sculpture of a {}.',
    'a photo of the hard to see {}.', 'a low resolution photo of the {}.',
    'a rendering of a {}.', 'graffiti of a {}.', 'a bad photo of the {}.',
    'a cropped photo of the {}.', 'a tattoo of a {}.', 'the embroidered {}.',
    'a photo of a hard to see {}.', 'a bright photo of a {}.',
    'a photo of a clean {}.', 'a photo of a dirty {}.',
    'a dark photo of the {}.', 'a drawing of a {}.', 'a photo of my {}.',
    'the plastic {}.', 'a photo of the cool {}.', 'a close-up photo of a {}.',
    'a black and white photo of the {}.', 'a painting of the {}.',
    'a painting of a {}.', 'a pixelated photo of the {}.',
    'a sculpture of the {}.', 'a bright photo of the {}.',
    'a cropped photo of a {}.', 'a plastic {}.', 'a photo of the dirty {}.',
    'a jpeg corrupted photo of a {}.', 'a blurry photo of the {}.',
    'a photo of the {}.', 'a good photo of the {}.', 'a rendering of the {}.',
    'a {} in a video game.', 'a photo of one {}.', 'a doodle of a {}.',
    'a close-up photo of the {}.', 'a photo of a {}.', 'the origami {}.',
    'the {} in a video game.', 'a sketch of a {}.', 'a doodle of the {}.',
    'a origami {}.', 'a low resolution photo of a {}.', 'the toy {}.',
    'a rendition of the {}.', 'a photo of the clean {}.',
    'a photo of a large {}.', 'a rendition of a {}.', 'a photo of a nice {}.',
    'a photo of a weird {}.', 'a blurry photo of a {}.', 'a cartoon {}.',
    'art of a {}.', 'a sketch of the {}.', 'a embroidered {}.',
    'a pixelated photo of a {}.', 'itap of the {}.',
    'a jpeg corrupted photo of the {}.', 'a good photo of a {}.',
    'itap of a {}.')

# F-ViT's 63 templates (CLIPSelf, F-ViT/tools/clip_utils.py), used with
# ``prompt_style='fvit'``: ``{article}`` is 'a'/'an' and prompts starting
# with "a"/"the" get a leading "This is ".
FVIT_TEMPLATES = (
    'There is {article} {} in the scene.', 'There is the {} in the scene.',
    'a photo of {article} {} in the scene.', 'a photo of the {} in the scene.',
    'a photo of one {} in the scene.', 'itap of {article} {}.',
    'itap of my {}.', 'itap of the {}.', 'a photo of {article} {}.',
    'a photo of my {}.', 'a photo of the {}.', 'a photo of one {}.',
    'a photo of many {}.', 'a good photo of {article} {}.',
    'a good photo of the {}.', 'a bad photo of {article} {}.',
    'a bad photo of the {}.', 'a photo of a nice {}.',
    'a photo of the nice {}.', 'a photo of a cool {}.',
    'a photo of the cool {}.', 'a photo of a weird {}.',
    'a photo of the weird {}.', 'a photo of a small {}.',
    'a photo of the small {}.', 'a photo of a large {}.',
    'a photo of the large {}.', 'a photo of a clean {}.',
    'a photo of the clean {}.', 'a photo of a dirty {}.',
    'a photo of the dirty {}.', 'a bright photo of {article} {}.',
    'a bright photo of the {}.', 'a dark photo of {article} {}.',
    'a dark photo of the {}.', 'a photo of a hard to see {}.',
    'a photo of the hard to see {}.',
    'a low resolution photo of {article} {}.',
    'a low resolution photo of the {}.', 'a cropped photo of {article} {}.',
    'a cropped photo of the {}.', 'a close-up photo of {article} {}.',
    'a close-up photo of the {}.', 'a jpeg corrupted photo of {article} {}.',
    'a jpeg corrupted photo of the {}.', 'a blurry photo of {article} {}.',
    'a blurry photo of the {}.', 'a pixelated photo of {article} {}.',
    'a pixelated photo of the {}.', 'a black and white photo of the {}.',
    'a black and white photo of {article} {}.', 'a plastic {}.',
    'the plastic {}.', 'a toy {}.', 'the toy {}.', 'a plushie {}.',
    'the plushie {}.', 'a cartoon {}.', 'the cartoon {}.',
    'an embroidered {}.', 'the embroidered {}.', 'a painting of the {}.',
    'a painting of a {}.')
# CLIP's full ImageNet prompt set (the 80 of CLIP's zero-shot notebook, the
# set MaskCLIP and the zero-shot segmentation literature use): the first 62
# of ``CLIP_TEMPLATES`` then 18 more.
IMAGENET_TEMPLATES = CLIP_TEMPLATES[:62] + (
    'a plushie {}.', 'a photo of the nice {}.', 'a photo of the small {}.',
    'a photo of the weird {}.', 'the cartoon {}.', 'art of the {}.',
    'a drawing of the {}.', 'a photo of the large {}.',
    'a black and white photo of a {}.', 'the plushie {}.',
    'a dark photo of a {}.', 'itap of a {}.', 'graffiti of the {}.',
    'a toy {}.', 'itap of my {}.', 'a photo of a cool {}.',
    'a photo of a small {}.', 'a tattoo of the {}.')
# The default prompt set: F-ViT's.
PROMPT_TEMPLATES = FVIT_TEMPLATES
SINGLE_TEMPLATE = ('a photo of a {}.', )
TEMPLATE_SETS = dict(
    fvit=FVIT_TEMPLATES,
    clip=CLIP_TEMPLATES,
    imagenet80=IMAGENET_TEMPLATES,
    single=SINGLE_TEMPLATE)
PROMPT_STYLES = ('fvit', 'plain')
# Separates the names (synonyms) of one class on a class-name file's line.
CLASS_NAME_SEPARATOR = ', '


def sidecar_path(npy_path: str) -> str:
    """The class-name list next to an embedding file: ``x.npy`` -> ``x.json``.
    """
    if not npy_path.endswith('.npy'):
        raise ValueError(f'text embeddings must be a .npy file: {npy_path}')
    return npy_path[:-len('.npy')] + '.json'


def read_class_names(path: str) -> List[str]:
    """Read class names: a ``.json`` list, an embedding sidecar, a
    COCO/LVIS annotation file (its categories in id order) or a ``.txt``
    (one a line)."""
    if not osp.isfile(path):
        raise FileNotFoundError(f'class-name file not found: {path}')
    if path.endswith('.json'):
        with open(path, encoding='utf-8') as f:
            names = json.load(f)
        if isinstance(names, dict) and 'categories' in names:
            names = names_from_annotations(names, path)[0]
        elif isinstance(names, dict) and 'classes' in names:
            names = names['classes']  # an embedding sidecar
    else:
        with open(path, encoding='utf-8') as f:
            names = [line.strip() for line in f if line.strip()]
    if (not isinstance(names, list)
            or not all(isinstance(n, str) for n in names)):
        raise ValueError(f'{path} must hold a list of class-name strings')
    return names


def _normalize(x: np.ndarray) -> np.ndarray:
    norm = np.linalg.norm(x, axis=-1, keepdims=True)
    if not np.all(np.isfinite(x)) or np.any(norm == 0):
        raise ValueError('embeddings must be finite and non-zero')
    return x / norm


def fvit_prompts(name: str, templates: Sequence[str]) -> List[str]:
    """F-ViT's prompts of one class name (CLIPSelf ``clip_utils``).

    The name is lower-cased with ``_`` read as a space, ``/`` as " or " and
    trailing dots removed; ``{article}`` is "an" when the raw name starts
    with a lower-case vowel, else "a"; prompts that start with "a" or
    "the" get a leading "This is ".
    """
    text = name.replace('_', ' ').replace('/', ' or ').lower().rstrip('.')
    article = 'an' if name[:1] in 'aeiou' and name else 'a'
    prompts = [tpl.format(text, article=article) for tpl in templates]
    return [
        'This is ' + p if p.startswith(('a', 'the')) else p for p in prompts
    ]


def plain_prompts(name: str, templates: Sequence[str]) -> List[str]:
    """Each template filled with the name, ``_`` read as a space."""
    return [tpl.format(name.replace('_', ' ')) for tpl in templates]


def build_class_embeddings(
        class_names: Sequence[str],
        encode_text_fn: Callable[[List[str]], object],
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
    return _embed_names(names, encode_text_fn, templates, prompt_style), names


def _embed_names(names: Sequence[str], encode_text_fn: Callable,
                 templates: Sequence[str], prompt_style: str) -> np.ndarray:
    """``(N, D)`` float32 prompt-ensembled rows of ``names``; a name given
    twice is encoded once (its rows are identical)."""
    if prompt_style not in PROMPT_STYLES:
        raise ValueError(f'prompt_style must be one of {PROMPT_STYLES}, got '
                         f'{prompt_style!r}')
    for tpl in templates:
        if tpl.count('{}') != 1:
            raise ValueError(f'template needs exactly one {{}}: {tpl!r}')
    make_prompts = fvit_prompts if prompt_style == 'fvit' else plain_prompts
    done: Dict[str, np.ndarray] = {}
    for name in names:
        if name in done:
            continue
        prompts = make_prompts(name, templates)
        feats = encode_text_fn(prompts)
        if hasattr(feats, 'detach'):  # torch tensor
            feats = feats.detach().float().cpu().numpy()
        feats = np.asarray(feats, dtype=np.float64)
        if feats.ndim != 2 or feats.shape[0] != len(prompts):
            raise ValueError(f'encode_text_fn returned shape {feats.shape} '
                             f'for {len(prompts)} prompts')
        done[name] = _normalize(_normalize(feats).mean(axis=0))
    return np.stack([done[n] for n in names]).astype(np.float32)


def read_class_name_file(path: str) -> List[List[str]]:
    """Read a class-name file of SCLIP / NACLIP's format: line ``k`` is
    class ``k``, its names (synonyms) separated by ``', '``.

    As SCLIP's ``get_cls_idx`` (``clip_segmentor.py``): lines are split at
    exactly ``', '`` and the names kept as written; a missing final newline
    does not matter. Unlike it, an empty line or an empty name is an error
    (SCLIP would embed an empty prompt), and ``\\r\\n`` line ends are read
    as ``\\n``.

    Returns:
        One list of names per class, in file order.

    Raises:
        FileNotFoundError: No such file.
        ValueError: An empty file, line or name, or a name listed twice on
            one line.
    """
    if not osp.isfile(path):
        raise FileNotFoundError(f'class-name file not found: {path}')
    with open(path, encoding='utf-8', newline='') as f:
        text = f.read()
    if text.endswith('\n'):
        text = text[:-1]
    if not text:
        raise ValueError(f'class-name file {path} is empty')
    lines = []
    for number, line in enumerate(text.split('\n'), 1):
        names = line.rstrip('\r').split(CLASS_NAME_SEPARATOR)
        if not all(n.strip() for n in names):
            raise ValueError(
                f'{path}:{number}: empty class name in {line!r} (a line is '
                f'one class, its names separated by {CLASS_NAME_SEPARATOR!r})')
        if len(set(names)) != len(names):
            raise ValueError(f'{path}:{number}: a name is listed twice in '
                             f'{line!r}')
        lines.append(names)
    return lines


def _squash(name: str) -> str:
    # SCLIP's files write many names without spaces ('trafficlight')
    return name.replace(' ', '').replace('_', '').lower()


def check_class_name_lines(lines: Sequence[Sequence[str]],
                           classes: Sequence[str], path: str) -> None:
    """Raise unless a class-name file's lines can be the dataset's classes
    in label order.

    Line ``k`` is class ``k``: the counts must be equal. The names of a line
    need not contain the class's own name (SCLIP's VOC20 file says ``ship``
    for ``boat``), so the order is checked where it can be: a line holding
    another class's name (spaces, ``_`` and case ignored) whose own line
    lacks it is a misplaced line.

    Raises:
        ValueError: Another count, or a misplaced line; naming the file,
            the line and the dataset class at both places.
    """
    classes = list(classes)
    if len(lines) != len(classes):
        raise ValueError(
            f'{path} has {len(lines)} lines (classes) but the dataset '
            f'{len(classes)} classes ({classes[:3]}...); line k must be the '
            'names of dataset class k')
    owned = [{_squash(n) for n in names} for names in lines]
    index = {_squash(c): k for k, c in enumerate(classes)}
    for k, names in enumerate(lines):
        for name in names:
            other = index.get(_squash(name))
            if other is not None and other != k and (_squash(classes[other])
                                                     not in owned[other]):
                raise ValueError(
                    f'{path}:{k + 1} lists {name!r}, the name of dataset '
                    f'class {other} ({classes[other]!r}), but line '
                    f'{other + 1} ({", ".join(lines[other])!r}) does not: '
                    f'the lines are not in the dataset\'s class order '
                    f'(line {k + 1} should name {classes[k]!r})')


def build_query_embeddings(
        lines: Sequence[Sequence[str]],
        encode_text_fn: Callable[[List[str]], object],
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
    return (_embed_names(queries, encode_text_fn, templates,
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
            ``prompt_style``); with it the sidecar is ``{"classes": names,
            "text_model": text_model}``, without it a plain list of names.
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
    np.save(path, embeddings)
    content = list(names)
    if query_class is not None:
        content = dict(
            classes=list(classes),
            queries=content,
            query_class=[int(k) for k in query_class])
    elif text_model is not None:
        content = dict(classes=content)
    if text_model is not None:
        content['text_model'] = dict(text_model)
    with open(side, 'w', encoding='utf-8') as f:
        json.dump(content, f, indent=0)
    return path


def read_text_model(path: str) -> Dict:
    """The text-model provenance recorded in an embedding file's sidecar
    (``{}`` when the sidecar is a plain name list)."""
    side = sidecar_path(path)
    if not osp.isfile(side):
        raise FileNotFoundError(f'class-name sidecar not found: {side}')
    with open(side, encoding='utf-8') as f:
        content = json.load(f)
    if isinstance(content, dict):
        return dict(content.get('text_model') or {})
    return {}


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
    with open(side, encoding='utf-8') as f:
        content = json.load(f)
    has_map = isinstance(content, dict) and ('queries' in content
                                             or 'query_class' in content)
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
    emb = np.load(path, allow_pickle=False)
    if emb.ndim != 2 or emb.shape[0] != len(queries):
        raise ValueError(f'{path} has shape {emb.shape} but {side} lists '
                         f'{len(queries)} ' +
                         ('queries' if has_map else 'names'))
    if not np.all(np.isfinite(emb)):
        raise ValueError(f'{path} holds NaN or infinite values')
    _check_query_map(query_class, len(queries), len(classes), side)
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


def resolve_class_names(spec: Union[str, Sequence[str]]) -> List[str]:
    """Class names from a list, a ``.json``/``.txt`` file, or the name of a
    registered mmdet dataset (its ``METAINFO['classes']``)."""
    if not isinstance(spec, str):
        return list(spec)
    if spec.endswith(('.json', '.txt')):
        return read_class_names(spec)
    from mmdet.registry import DATASETS
    dataset = DATASETS.get(spec)
    if dataset is None or 'classes' not in getattr(dataset, 'METAINFO', {}):
        raise ValueError(f'{spec!r} is neither a class-name file nor a '
                         'registered dataset with METAINFO classes')
    return list(dataset.METAINFO['classes'])


def names_from_annotations(
        ann: dict,
        source: str = 'the annotation dict') -> Tuple[List[str], List[str]]:
    """``(all names, base names)`` of a COCO/LVIS annotation dict, in
    category-id order (the label order of mmdet's datasets).

    Base classes are those with ``split`` ``'base'`` or OVR-CNN's
    ``'seen'`` (OV-COCO split files, :func:`~mmlocat.datasets.ov_coco.
    split_base_names`: other labels or no base class are an error naming
    ``source``) or LVIS ``frequency`` ``'f'``/``'c'``; with neither field,
    all.
    """
    if 'categories' not in ann:
        raise ValueError('not a COCO/LVIS annotation dict: no categories')
    cats = sorted(ann['categories'], key=lambda c: c['id'])
    names = [c['name'] for c in cats]
    if any('split' in c for c in cats):
        base = split_base_names(cats, source)
    elif any('frequency' in c for c in cats):
        base = [c['name'] for c in cats if c.get('frequency') in ('f', 'c')]
    else:
        base = list(names)
    return names, base


def config_class_names(cfg) -> List[str]:
    """The classes a zero-shot segmentation config's embedding file must
    hold: its test dataset's ``metainfo['classes']`` (the config's
    ``metainfo`` or the registered dataset's ``METAINFO``), in label order,
    without the background class when the model has a ``bg_thresh``.

    Args:
        cfg: An mmengine ``Config`` with ``test_dataloader`` and ``model``.
    """
    import importlib
    dataset = cfg.test_dataloader.dataset
    classes = (dataset.get('metainfo') or {}).get('classes')
    if classes is None:
        # the host's own registry (e.g. mmseg's) finds its unprefixed types
        scope = cfg.get('default_scope', 'mmengine')
        registry = importlib.import_module(f'{scope}.registry').DATASETS
        dataset_cls = registry.get(dataset['type'])
        if dataset_cls is None or 'classes' not in getattr(
                dataset_cls, 'METAINFO', {}):
            raise ValueError(f'the test dataset {dataset["type"]!r} of the '
                             'config has no classes in its metainfo')
        classes = dataset_cls.METAINFO['classes']
    classes = list(classes)
    model = cfg.get('model', {})
    if model.get('bg_thresh') is not None:
        background = model.get('background_class', BACKGROUND)
        classes = [c for c in classes if c != background]
    return classes


def config_class_name_lines(cfg) -> List[List[str]]:
    """The query names of a zero-shot segmentation config, one list per
    class of :func:`config_class_names`: the lines of its model's
    ``class_name_file`` (checked against those classes), or each class's
    own name when it names no file."""
    classes = config_class_names(cfg)
    path = cfg.get('model', {}).get('class_name_file')
    if path is None:
        return [[c] for c in classes]
    lines = read_class_name_file(path)
    check_class_name_lines(lines, classes, path)
    return lines


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


def save_base_classes(npy_path: str, base: Sequence[str]) -> str:
    """Write the base classes next to an embedding file: ``X.npy`` ->
    ``X.base.json`` (a name list, read as ``base_class_names``)."""
    path = osp.splitext(npy_path)[0] + '.base.json'
    with open(path, 'w', encoding='utf-8') as f:
        json.dump(list(base), f, indent=0)
    return path
