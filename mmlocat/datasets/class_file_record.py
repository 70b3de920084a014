"""The class files travel with the checkpoint: the class-file record.

An open-vocabulary model reads its classes from files when it is built:
F-ViT's box head (CLIPSelf, https://arxiv.org/abs/2310.01403) its class
text embeddings and its base-class list, a zero-shot segmentor its text
embeddings. The weights are trained against those rows: a checkpoint
tested with an embedding file regenerated with other values (another CLIP,
other prompts) or other classes evaluates something else, silently.

:func:`class_file_record` lists every such file a model read (a submodule
attribute named in :data:`FILE_ATTRS`) with its sha256 and its row names;
:class:`mmlocat.RecordHook` writes it into every checkpoint's
``meta['class_files']``; :func:`check_class_files` (``tools/test.py``,
``tools/infer.py``) compares the files the model reads now with the record
and refuses a changed or reordered file, naming both hashes and the classes
that differ, unless the change is allowed (:data:`ALLOW_OPTION`; on
resume, :class:`mmlocat.RecordHook`, never: :data:`RESUME_FIX`). The
record was ``meta['vocabulary']`` before (read still, written as
``class_files``: :data:`~mmlocat.utils.records.LEGACY_KEYS`); a
"vocabulary" is now only the class names a model queries at run time
(:mod:`mmlocat.apis.vocabulary`). A checkpoint without the record
(trained before it existed, or converted) is accepted with a one-line note;
``clipself_fvit2mmlocat.py`` records the embedding file it checked or
exported (``--text-embeddings`` / ``--export-embeddings``) like training
does, and without one its record of F-ViT's own class embeddings
(``meta['clipself_fvit']``: the rows' float32 sha256) is compared with the
file's rows.
"""
import logging
import os.path as osp
from typing import Dict, List, Optional

from mmengine.logging import print_log
from mmengine.model import is_model_wrapper

from mmlocat.text import BACKGROUND, load_query_embeddings, read_class_names
from mmlocat.utils.records import (CLASS_FILES_KEY, CLIPSELF_KEY,
                                   CONVERTER_KEY, check_meta, file_sha256,
                                   read_checkpoint_meta, rows_sha256)
from mmlocat.utils.safe_load import load_array

__all__ = [
    'CLASS_FILES_KEY', 'FILE_ATTRS', 'class_files', 'class_file_record',
    'file_record', 'check_class_files', 'ALLOW_OPTION'
]

#: ``(attribute, role)``: a submodule's attribute holding the path of a file
#: it read, and the config argument that named it (the record's key is
#: ``<submodule>.<role>``).
FILE_ATTRS = (('text_embeddings_file', 'text_embeddings'),
              ('base_class_names_file', 'base_class_names'))
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


def class_files(model) -> Dict[str, str]:
    """``{'<submodule>.<role>': path}`` of the files ``model`` read."""
    if is_model_wrapper(model):
        model = model.module
    files = {}
    for name, module in model.named_modules():
        for attr, role in FILE_ATTRS:
            path = getattr(module, attr, None)
            if isinstance(path, str):
                files[f'{name}.{role}' if name else role] = path
    return files


def _row_names(role: str, path: str) -> List[str]:
    """The names of a file's rows, in order: an embedding file's rows
    (classes, or query names, and ``background``), a class list's names."""
    if role.split('.')[-1] == 'text_embeddings':
        return load_query_embeddings(path).queries
    return read_class_names(path)


def file_record(role: str, path: str) -> Dict:
    """``{'file', 'sha256', 'names'}`` of one file read as ``role``: its
    path, the sha256 of its bytes (the ``.npy`` of an embedding file) and
    its row names (an embedding file's sidecar); a file differs from its
    record when either differs."""
    return dict(
        file=path, sha256=file_sha256(path), names=_row_names(role, path))


def class_file_record(model) -> Dict[str, Dict]:
    """``{role: file_record}`` (:func:`file_record`) of every file
    ``model`` read (:func:`class_files`)."""
    return {
        role: file_record(role, path)
        for role, path in sorted(class_files(model).items())
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


def _rows_sha256(path: str) -> str:
    """:func:`~mmlocat.utils.records.rows_sha256` of an embedding file's
    rows (how ``clipself_fvit2mmlocat.py`` records the checkpoint's)."""
    return rows_sha256(load_array(path))


def _compare_clipself(files: Dict[str, str], record: Dict,
                      checkpoint: str) -> List[str]:
    """Differences of the text-embedding files from the class embeddings
    a converted CLIPSelf F-ViT checkpoint stored."""
    stored = record.get('class_embeddings') or {}
    problems = []
    for role, path in sorted(files.items()):
        if role.split('.')[-1] != 'text_embeddings' or not stored:
            continue
        found = _rows_sha256(path)
        if found == stored.get('sha256'):
            continue
        detail = ''
        classes = record.get('classes')
        if classes:
            names = [n for n in _row_names(role, path) if n != BACKGROUND]
            detail = ': ' + _name_difference(names, list(classes))
        problems.append(
            f'{checkpoint} was converted from an F-ViT checkpoint whose '
            f'class embeddings {stored.get("shape")} have sha256 '
            f'{stored.get("sha256")} (rows as float32) but the model reads '
            f'{role} {path} whose rows have sha256 {found}{detail}')
    return problems


def check_class_files(model,
                      checkpoint: str,
                      allow_change: bool = False,
                      logger=None,
                      meta: Optional[Dict] = None,
                      fix: str = TEST_FIX) -> List[str]:
    """Compare the files ``model`` read with ``checkpoint``'s record.

    Args:
        model: The built model (its embedding files are read now).
        checkpoint: The checkpoint it will run with.
        allow_change: Only warn about differences (:data:`ALLOW_OPTION`).
        logger: Where notes and warnings go (default: the current logger).
        meta: ``checkpoint``'s ``meta`` when the caller has read it
            (:func:`mmlocat.utils.pretrained.load_model_weights`); by
            default it is read from the file (either way its legacy keys
            are read, :func:`~mmlocat.utils.records.check_meta`).
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
    files = class_files(model)
    if not files:
        return []
    if meta is None:
        meta = (
            read_checkpoint_meta(checkpoint) if osp.isfile(checkpoint) else {})
    meta = check_meta(meta, checkpoint)
    recorded = meta.get(CLASS_FILES_KEY)
    if recorded is None and isinstance(meta.get(CLIPSELF_KEY), dict):
        problems = _compare_clipself(files, meta[CLIPSELF_KEY], checkpoint)
    elif recorded is None:
        print_log(
            f'class files: {checkpoint} records no class files (trained '
            'before mmlocat recorded it, or converted): '
            f'{", ".join(sorted(files.values()))} used as given',
            logger=logger)
        return []
    else:
        now = class_file_record(model)
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
