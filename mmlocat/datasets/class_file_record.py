"""The class files a model read: the dataset side of the class-file record.

An open-vocabulary model reads its classes from files when it is built:
F-ViT's box head (CLIPSelf, https://arxiv.org/abs/2310.01403) its class
text embeddings and its base-class list, a zero-shot segmentor its text
embeddings. The weights are trained against those rows: a checkpoint
tested with an embedding file regenerated with other values (another CLIP,
other prompts) or other classes evaluates something else, silently.

:func:`model_class_files` lists every such file a model read (a submodule
attribute named in :data:`FILE_ATTRS`) with how its row names are read
(through :mod:`mmlocat.text`): a :class:`~mmlocat.utils.records.
ClassFiles`. The record itself (each file's sha256 and row names,
:func:`~mmlocat.utils.records.files_record`) and its check
(:func:`~mmlocat.utils.records.check_class_files`, called by
``tools/test.py``, ``tools/infer.py`` and, on resume,
:class:`mmlocat.RecordHook`) are :mod:`mmlocat.utils.records`';
:func:`class_file_record` is the record of a model, which
:class:`mmlocat.RecordHook` writes into every checkpoint's
``meta['class_files']``.
"""
from typing import Dict, List, Mapping

from mmengine.model import is_model_wrapper

from mmlocat.text import BACKGROUND, load_query_embeddings, read_class_names
from mmlocat.utils.records import ClassFiles, files_record

__all__ = [
    'FILE_ATTRS', 'class_files_of', 'model_class_files', 'class_file_record'
]

#: ``(attribute, role)``: a submodule's attribute holding the path of a file
#: it read, and the config argument that named it (the record's key is
#: ``<submodule>.<role>``).
FILE_ATTRS = (('text_embeddings_file', 'text_embeddings'),
              ('base_class_names_file', 'base_class_names'))


def _row_names(role: str, path: str) -> List[str]:
    """The names of a file's rows, in order: an embedding file's rows
    (classes, or query names, and ``background``), a class list's names."""
    if role.split('.')[-1] == 'text_embeddings':
        return load_query_embeddings(path).queries
    return read_class_names(path)


def class_files_of(files: Mapping[str, str]) -> ClassFiles:
    """:class:`~mmlocat.utils.records.ClassFiles` of ``{role: path}``
    (their row names read through :mod:`mmlocat.text`)."""
    return ClassFiles(dict(files), _row_names, BACKGROUND)


def model_class_files(model) -> ClassFiles:
    """The files ``model`` read (``{'<submodule>.<role>': path}``), as
    :class:`~mmlocat.utils.records.ClassFiles`."""
    if is_model_wrapper(model):
        model = model.module
    files = {}
    for name, module in model.named_modules():
        for attr, role in FILE_ATTRS:
            path = getattr(module, attr, None)
            if isinstance(path, str):
                files[f'{name}.{role}' if name else role] = path
    return class_files_of(files)


def class_file_record(model) -> Dict[str, Dict]:
    """``{role: file_record}`` (:func:`~mmlocat.utils.records.
    files_record`) of every file ``model`` read
    (:func:`model_class_files`)."""
    return files_record(model_class_files(model))
