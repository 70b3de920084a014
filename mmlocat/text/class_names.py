"""Class names: class-name files, a config's dataset classes.

* Files: :func:`read_class_names` (one name per class: a ``.txt``, a
  ``.json`` list, an embedding sidecar or COCO/LVIS annotations) and
  :func:`read_class_name_file` (SCLIP / NACLIP's format, several names
  per class: ``person, person in shirt, ...``).
* :func:`resolve_class_names`: a class list named in a model's arguments
  (a list, a file, or a registered mmdet dataset type such as
  ``'LVISV1Dataset'``), e.g. F-ViT's ``class_names`` and
  ``base_class_names``.
* :func:`dataset_classes`: the classes of a config's test dataset, the one
  resolver of "the classes of this config" (see its scope rule);
  :func:`zero_shot_classes` is what a zero-shot segmentation config's
  text embeddings must hold (its dataset classes without a ``bg_thresh``
  background).
"""
import importlib
import json
import os.path as osp
import re
from typing import Dict, List, Optional, Sequence, Tuple, Union

__all__ = [
    'BACKGROUND', 'CLASS_NAME_SEPARATOR', 'read_utf8', 'read_json',
    'read_class_names', 'read_class_name_file', 'check_class_name_lines',
    'names_from_annotations', 'resolve_class_names', 'registered_metainfo',
    'dataset_metainfo', 'dataset_classes', 'zero_shot_classes',
    'zero_shot_class_name_lines', 'IMAGENET_NAME_SOURCES',
    'IMAGENET_OPEN_CLIP_FILE', 'imagenet_class_names', 'NAMED_CLASS_LISTS'
]

#: The row name of F-ViT's background embedding, and the default background
#: class of a zero-shot segmentor with ``bg_thresh``.
BACKGROUND = 'background'
#: Separates the names (synonyms) of one class on a class-name file's line.
CLASS_NAME_SEPARATOR = ', '

#: ImageNet-1k class-name lists, both in ImageNet's label order (the order
#: of mmpretrain's ``ImageNet`` dataset), named in configs as
#: ``'imagenet_open_clip'`` / ``'imagenet_wordnet'``
#: (:func:`resolve_class_names`): ``'open_clip'``, open_clip's curated
#: ``IMAGENET_CLASSNAMES`` (https://github.com/mlfoundations/open_clip,
#: MIT; shipped as :data:`IMAGENET_OPEN_CLIP_FILE`), which open_clip's
#: zero-shot evaluation fills into the 80 OpenAI templates (two names occur
#: twice in it, ``missile`` and ``sunglasses``: both classes get the same
#: embedding, as in open_clip); ``'wordnet'``, mmpretrain's
#: ``IMAGENET_CATEGORIES`` (WordNet synonym strings, ``'tench, Tinca
#: tinca'``).
IMAGENET_NAME_SOURCES = ('open_clip', 'wordnet')
IMAGENET_OPEN_CLIP_FILE = osp.join(
    osp.dirname(osp.dirname(osp.abspath(__file__))), 'datasets', 'data',
    'imagenet_open_clip.txt')

#: The fix a class-name file that is not UTF-8 gets.
_UTF8_FIX = ('save it as UTF-8 (e.g. iconv -f latin1 -t utf-8 FILE > '
             'NEW_FILE)')


def read_utf8(path: str) -> str:
    """The text of a UTF-8 file (class names, sidecars); a file in another
    encoding is an error naming the file, the line and the fix."""
    # the caption reader's decoder: one wording of this error
    from mmlocat.datasets.captions import decode_text
    with open(path, 'rb') as f:
        return decode_text(f.read(), 'utf-8', path, fix=_UTF8_FIX)


def read_json(path: str, fix: str) -> object:
    """A UTF-8 JSON file's content.

    Args:
        path: The file.
        fix: What to do about a file that is not JSON (a truncated
            write), for the message.

    Raises:
        ValueError: Not UTF-8 (:func:`read_utf8`) or not JSON; naming the
            file, the line and column where parsing stopped and ``fix``.
    """
    text = read_utf8(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        # a file cut short stops at its end or inside its last string
        cut = (not text[err.pos:].strip()
               or err.msg.startswith('Unterminated string'))
        ends = ' (it ends early: truncated?)' if cut else ''
        raise ValueError(
            f'{path}:{err.lineno}:{err.colno}: not valid JSON{ends}: '
            f'{err.msg}; {fix}') from None


def _check_unique(names: Sequence[str],
                  where: str,
                  unit: str,
                  numbered: bool = False) -> None:
    """Raise on a name listed twice, naming both places (1-based ``unit``
    numbers; ``numbered``: ``where`` is a file, named ``file:number``)."""
    first: Dict[str, int] = {}
    for number, name in enumerate(names, 1):
        if name in first:
            at = f'{where}:{number}' if numbered else where
            raise ValueError(
                f'{at}: class name {name!r} is listed twice ({unit}s '
                f'{first[name]} and {number}); a class is one {unit}: '
                'remove one of them')
        first[name] = number


def read_class_names(path: str, unique: bool = False) -> List[str]:
    """Read class names: a ``.json`` list, an embedding sidecar, a
    COCO/LVIS annotation file (its categories in id order) or a ``.txt``
    (one a line; an empty line before the last name is an error, a
    separator in a line too). Lists given as arguments are read through
    :func:`resolve_class_names`.

    Args:
        path: The file (UTF-8).
        unique: A name listed twice is an error (a vocabulary, a
            ``--names`` list; ImageNet's sidecars repeat names on
            purpose).

    Raises:
        FileNotFoundError: No such file.
        ValueError: Not UTF-8, not JSON, not a list of strings, an empty
            or a separated ``.txt`` line, or (with ``unique``) a
            duplicate; naming the file and the line (the item of a JSON
            list).
    """
    if not osp.isfile(path):
        raise FileNotFoundError(f'class-name file not found: {path}')
    if path.endswith('.json'):
        names = read_json(path, 'fix the JSON (a list of class names)')
        if isinstance(names, dict) and 'categories' in names:
            names = names_from_annotations(names, path)[0]
        elif isinstance(names, dict) and 'classes' in names:
            names = names['classes']  # an embedding sidecar
        unit = 'item'
    else:
        # universal newlines, as a text-mode read splits them
        lines = read_utf8(path).replace('\r\n', '\n').replace('\r', '\n')
        numbered = list(enumerate(lines.rstrip().split('\n'), 1))
        names = [line.strip() for _, line in numbered]
        unit = 'line'
        if not lines.strip():
            raise ValueError(f'class-name file {path} is empty')
        for number, name in numbered:
            if not name.strip():
                # a gap: a class deleted, or two lists pasted together
                raise ValueError(
                    f'{path}:{number}: empty line; a .txt list is one '
                    'class name a line, with no empty lines: remove it')
            if ',' in name or ';' in name:
                # SCLIP's synonym lines read here would be one name each
                raise ValueError(
                    f'{path}:{number}: {name!r} holds a separator; a .txt '
                    'list is one class name a line. Several names of one '
                    'class (SCLIP\'s "a, b" lines) are a class-name file '
                    '(class_name_file, dump_text_embeddings.py '
                    '--seg-config); a name with a comma goes in a .json '
                    'list, read verbatim')
    if (not isinstance(names, list)
            or not all(isinstance(n, str) for n in names)):
        raise ValueError(f'{path} must hold a list of class-name strings')
    if unique:
        _check_unique(names, path, unit, numbered=True)
    return names


def read_class_name_file(path: str) -> List[List[str]]:
    """Read a class-name file of SCLIP / NACLIP's format: line ``k`` is
    class ``k``, its names (synonyms) separated by ``', '``.

    As SCLIP's ``get_cls_idx`` (``clip_segmentor.py``): lines are split at
    exactly ``', '`` and the names kept as written; a missing final newline
    does not matter. Unlike it, an empty line or an empty name is an error
    (SCLIP would embed an empty prompt), and ``\\r\\n`` line ends are read
    as ``\\n``.

    A name on two lines is refused by :func:`check_class_name_lines`,
    which every reader of such a file calls with the dataset's classes (it
    knows which line is the background, the one line that may share
    names).

    Returns:
        One list of names per class, in file order.

    Raises:
        FileNotFoundError: No such file.
        ValueError: An empty file, line or name, a name listed twice on
            one line, a name holding ``;`` or a
            comma without the space (``a,b``: SCLIP would embed one name);
            naming the file and the line.
    """
    if not osp.isfile(path):
        raise FileNotFoundError(f'class-name file not found: {path}')
    text = read_utf8(path)
    if text.endswith('\n'):
        text = text[:-1]
    if not text:
        raise ValueError(f'class-name file {path} is empty')
    lines = []
    for number, line in enumerate(text.split('\n'), 1):
        line = line.rstrip('\r')
        names = line.split(CLASS_NAME_SEPARATOR)
        if not all(n.strip() for n in names):
            raise ValueError(
                f'{path}:{number}: empty class name in {line!r} (a line is '
                f'one class, its names separated by {CLASS_NAME_SEPARATOR!r})')
        for name in names:
            # 'a,b' / 'a; b' would be one query name: ambiguous
            if ',' in name or ';' in name:
                raise ValueError(
                    f'{path}:{number}: {name!r} in {line!r} is not a name: '
                    f'the names of a class are separated by exactly '
                    f'{CLASS_NAME_SEPARATOR!r} (a comma and one space); '
                    '";" and a comma without the space are refused')
        if len(set(names)) != len(names):
            raise ValueError(f'{path}:{number}: a name is listed twice in '
                             f'{line!r}')
        lines.append(names)
    return lines


def _squash(name: str) -> str:
    # SCLIP's files write many names without spaces ('trafficlight')
    return name.replace(' ', '').replace('_', '').lower()


def check_class_name_lines(lines: Sequence[Sequence[str]],
                           classes: Sequence[str],
                           path: str,
                           background: str = BACKGROUND) -> None:
    """Raise unless a class-name file's lines can be the dataset's classes
    in label order.

    Line ``k`` is class ``k``: the counts must be equal. A name on two
    lines would be two classes' query: an error, with one documented
    escape: the line of the ``background`` class (SCLIP's text background,
    read with a background row, e.g. line 1 of ``coco-object.txt``) may
    share names with object classes (SCLIP's background synonyms list
    ``bed``, also class 60's name; the pixel goes to whichever scores
    higher, as in SCLIP). The names of a line
    need not contain the class's own name (SCLIP's VOC20 file says ``ship``
    for ``boat``), so the order is checked where it can be: a line holding
    another class's name (spaces, ``_`` and case ignored) whose own line
    lacks it is a misplaced line.

    Raises:
        ValueError: Another count, a name on two lines (neither the
            background's: naming the file and both lines), or a misplaced
            line; naming the file, the line and the dataset class at both
            places.
    """
    classes = list(classes)
    if len(lines) != len(classes):
        raise ValueError(
            f'{path} has {len(lines)} lines (classes) but the dataset '
            f'{len(classes)} classes ({classes[:3]}...); line k must be the '
            'names of dataset class k')
    first: Dict[str, int] = {}
    for k, names in enumerate(lines):
        if classes[k] == background:
            continue  # the escape: background synonyms (see above)
        for name in names:
            if first.setdefault(name, k) != k:
                raise ValueError(
                    f'{path}:{k + 1}: {name!r} is also on line '
                    f'{first[name] + 1} (lines {first[name] + 1} and '
                    f'{k + 1}); a name is the query of one class: remove '
                    f'it from one line (only the {background!r} line may '
                    'share names with object classes)')
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
    # mmlocat.datasets imports this package: its split reader is imported
    # where it is used
    from mmlocat.datasets.ov_coco import split_base_names
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


def registered_metainfo(dataset_type: str, scope: Optional[str]) -> Dict:
    """The ``METAINFO`` of a registered dataset type (lower-cased keys), or
    ``{}`` when the type is not registered or has none.

    Args:
        dataset_type: A dataset type as configs write it (``'ADE20KDataset'``,
            ``'mmlocat.COCOObjectDataset'``).
        scope: The host whose registry resolves unprefixed types
            (``'mmseg'``, ``'mmdet'``, ...); None: mmengine's root registry.
    """
    registry = importlib.import_module(
        f'{scope or "mmengine"}.registry').DATASETS
    dataset_cls = registry.get(dataset_type)
    meta = getattr(dataset_cls, 'METAINFO', None) or {}
    return {k.lower(): v for k, v in meta.items()}


#: The named class lists :func:`resolve_class_names` knows: a string equal
#: to one of these names the list, never a class of that name.
NAMED_CLASS_LISTS = tuple(f'imagenet_{source}'
                          for source in IMAGENET_NAME_SOURCES)
#: How a named list or a dataset type is recognised in a string that is
#: neither (a typo): a prefix of :data:`NAMED_CLASS_LISTS`, or the suffix
#: of a dataset type. Such a string is an error, not one class name.
_LIST_LIKE = re.compile(r'^imagenet_|Dataset$')


def resolve_class_names(spec: Union[str, Sequence[str]],
                        unique: bool = False) -> List[str]:
    """The one reader of a class list given as an argument: a model's or
    metric's ``class_names`` / ``base_class_names``, a run-time vocabulary
    (``tools/infer.py --classes``, :func:`mmlocat.apis.parse_vocabulary`),
    ``dump_text_embeddings.py --names``.

    The grammar, tried in this order (the first that applies wins):

    1. A list (or tuple) of strings: the class names, each stripped
       (empty ones dropped).
    2. A string naming an existing file, or ending in ``.txt`` /
       ``.json``: the file (:func:`read_class_names`: one name a ``.txt``
       line, a ``.json`` list, an embedding sidecar, COCO/LVIS
       annotations); a missing one is an error.
    3. A named list (:data:`NAMED_CLASS_LISTS`: ``'imagenet_open_clip'``,
       ``'imagenet_wordnet'``, :func:`imagenet_class_names`), taken as
       shipped (open_clip's list names two classes twice, on purpose).
    4. A string with a comma: class names separated by commas
       (``'cat, remote control'``), each stripped; empty items (a
       trailing comma) are dropped. A typed string has no synonyms.
    5. A registered mmdet dataset type (``'LVISV1Dataset'``): its
       ``METAINFO['classes']``.
    6. Any other string: ONE class of that name (``--classes cat``).

    So a named list or a dataset type wins over a single class of the same
    name; a string that looks like one but is not (``'imagenet_x'``,
    ``'NoSuchDataset'``) is an error rather than a class, and ``';'`` is
    refused in a typed string (write commas).

    Not a config's dataset classes (that is :func:`dataset_classes`).

    Args:
        spec: The class list, as above.
        unique: A name listed twice is an error naming both places (a
            vocabulary, a ``--names`` list); named lists are exempt.

    Raises:
        FileNotFoundError: A ``.txt`` / ``.json`` path that does not exist.
        ValueError: No names, a name that is not a string, ``';'`` in a
            typed string, an unknown list-like name, a duplicate (with
            ``unique``), or a file's error (:func:`read_class_names`).
    """
    if not isinstance(spec, str):
        bad = [n for n in spec if not isinstance(n, str)]
        if bad:
            raise ValueError(f'class names must be strings, got {bad[:3]}')
        names = [n.strip() for n in spec if n.strip()]
        where = 'the class list'
    elif osp.isfile(spec) or spec.endswith(('.json', '.txt')):
        return read_class_names(spec, unique=unique)
    elif spec in NAMED_CLASS_LISTS:
        return imagenet_class_names(spec[len('imagenet_'):])
    elif ';' in spec:
        raise ValueError(
            f'{spec!r}: ";" does not separate class names; separate them '
            'by commas ("cat, remote control")')
    elif ',' in spec or not spec.strip():
        names = [n.strip() for n in spec.split(',') if n.strip()]
        where = f'{spec!r}'
    else:
        classes = registered_metainfo(spec, 'mmdet').get('classes')
        if classes is not None:
            return list(classes)
        if _LIST_LIKE.search(spec.strip()):
            raise ValueError(
                f'{spec!r} is neither a class-name file, a named list '
                f'{NAMED_CLASS_LISTS} nor a registered mmdet dataset with '
                'METAINFO classes')
        names = [spec.strip()]
        where = f'{spec!r}'
    if not names:
        raise ValueError(f'empty class list: {spec!r} names no class; give '
                         'names separated '
                         'by commas ("cat, remote control"), a .txt / .json '
                         'file of names, a named list or a dataset type')
    if unique:
        _check_unique(names, where, 'item')
    return names


def dataset_metainfo(cfg, scope: Optional[str] = None) -> Dict:
    """The metainfo (lower-cased keys) of a config's test dataset.

    Scope rule (the one place it is decided): the test dataset's
    ``metainfo`` in the config, over the ``METAINFO`` of its ``type`` as
    registered in the registry of ``scope`` (default: the config's
    ``default_scope``, whose unprefixed types are that host's; mmengine's
    root registry when there is none). ``{}`` when the config has no test
    dataset.

    Args:
        cfg: An mmengine ``Config``.
        scope: The host registry to resolve the dataset type in.
    """
    dataset = (cfg.get('test_dataloader') or {}).get('dataset') or {}
    info = {k.lower(): v for k, v in (dataset.get('metainfo') or {}).items()}
    if not info.get('classes') and dataset.get('type'):
        scope = scope or cfg.get('default_scope')
        info = dict(registered_metainfo(dataset['type'], scope), **info)
    return info


def dataset_classes(cfg, scope: Optional[str] = None) -> List[str]:
    """The classes of a config's test dataset, in label order
    (:func:`dataset_metainfo`'s scope rule).

    Raises:
        ValueError: The test dataset has no classes in its metainfo.
    """
    classes = dataset_metainfo(cfg, scope).get('classes')
    if classes is None:
        dataset = (cfg.get('test_dataloader') or {}).get('dataset') or {}
        raise ValueError(f'the test dataset {dataset.get("type")!r} of the '
                         'config has no classes in its metainfo')
    return list(classes)


def zero_shot_classes(cfg) -> List[str]:
    """The classes a zero-shot segmentation config's text embeddings must
    hold: :func:`dataset_classes` without the background class when the
    model has a ``bg_thresh`` (a constant background channel, not a text
    row).

    Args:
        cfg: An mmengine ``Config`` with ``test_dataloader`` and ``model``.
    """
    classes = dataset_classes(cfg)
    model = cfg.get('model', {})
    if model.get('bg_thresh') is not None:
        background = model.get('background_class', BACKGROUND)
        classes = [c for c in classes if c != background]
    return classes


def zero_shot_class_name_lines(cfg) -> List[List[str]]:
    """The query names of a zero-shot segmentation config, one list per
    class of :func:`zero_shot_classes`: the lines of its model's
    ``class_name_file`` (checked against those classes), or each class's
    own name when it names no file."""
    classes = zero_shot_classes(cfg)
    path = cfg.get('model', {}).get('class_name_file')
    if path is None:
        return [[c] for c in classes]
    lines = read_class_name_file(path)
    check_class_name_lines(lines, classes, path)
    return lines


def imagenet_class_names(source: str = 'open_clip') -> List[str]:
    """The 1,000 ImageNet-1k class names of ``source``
    (:data:`IMAGENET_NAME_SOURCES`) in label order."""
    if source == 'open_clip':
        names = read_class_names(IMAGENET_OPEN_CLIP_FILE)
    elif source == 'wordnet':
        from mmpretrain.datasets.categories import IMAGENET_CATEGORIES
        names = list(IMAGENET_CATEGORIES)
    else:
        raise ValueError(f'ImageNet class names come from one of '
                         f'{IMAGENET_NAME_SOURCES}, got {source!r}')
    if len(names) != 1000:
        raise ValueError(f'{source}: {len(names)} ImageNet class names, '
                         'expected 1000')
    return names
