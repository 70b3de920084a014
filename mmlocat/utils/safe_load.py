"""The one reader of untrusted files: nothing mmlocat reads runs code.

Checkpoints, embedding files, sidecars and caption shards come from many
places, so every read of a file format that *could* run code goes through
this module, and nowhere else (``tests/test_utils/test_safe_load.py``
scans ``mmlocat/`` and ``tools/`` for any other ``torch.load``,
``np.load``, ``pickle``, ``yaml.load`` or ``torch.jit.load``):

* :func:`torch_load`: the one ``torch.load`` call, always with torch's
  weights-only unpickler (tensors, plain containers and the types named
  below; any other global is refused before it is built);
* :func:`load_array`: the one ``np.load`` call, ``allow_pickle=False``
  (object arrays are refused), ``.npy`` only (an ``.npz`` archive is
  named as such);
* :func:`read_torchscript_state_dict`: the parameters and buffers of a
  TorchScript archive (OpenAI's CLIP ``ViT-*.pt``) read from its data
  records with an unpickler that resolves no global except tensor
  rebuilding and inert placeholders; TorchScript code is never compiled or
  run (no ``torch.jit.load``).

JSON never runs code; its one reader (UTF-8, errors naming file, line and
column) is :func:`mmlocat.text.class_names.read_json`.

Format *detection* reads bytes only (``checkpoint_io.sniff_checkpoint``).

torch >= 2.6 loads with ``weights_only=True`` by default, which refuses
the objects mmengine's ``MessageHub`` keeps in every training checkpoint:
``HistoryBuffer`` objects with numpy arrays and scalars inside. Rather than
switching the check off, or registering types for the whole process when
mmlocat is imported, two narrow things are provided:

* :func:`mmengine_checkpoint_globals`: a context manager allowing exactly
  those plain data types (``HistoryBuffer``, numpy arrays, scalars and
  dtypes, ``_codecs.encode`` used by numpy's pickles) for the loads inside
  it, and removing again what it added;
* :func:`history_buffer_for_saving` / :func:`history_buffer_from_saved`:
  a ``HistoryBuffer`` as plain data (tensors and ints) and back. mmengine's
  own ``__getstate__`` stores bound references such as
  ``HistoryBuffer.mean``, pickled as ``getattr(HistoryBuffer, 'mean')``;
  allowing ``getattr`` would let a checkpoint reach arbitrary objects,
  i.e. disable the check. Written as plain data, a checkpoint needs no
  allow-listing at all (the hosts' ``tools/test.py`` reads it).

:class:`mmlocat.engine.WeightsOnlyCheckpointHook` applies both to a
Runner; mmengine's classes are not modified.
"""
import ast
import codecs
import contextlib
import pickle
import sys
import zipfile
from collections import OrderedDict
from typing import (IO, Any, Callable, Dict, Iterator, List, Optional,
                    Sequence, Union)

import numpy as np
import torch

__all__ = [
    'mmengine_checkpoint_safe_globals', 'mmengine_checkpoint_globals',
    'history_buffer_for_saving', 'history_buffer_from_saved', 'torch_load',
    'load_array', 'read_torchscript_state_dict'
]


def _numpy_safe_globals() -> list:
    """Numpy objects that pickle numpy scalars and arrays."""
    globals_ = [np.dtype, np.ndarray]
    for module_name in ('numpy._core.multiarray', 'numpy.core.multiarray'):
        try:
            module = __import__(module_name, fromlist=['scalar'])
        except ImportError:
            continue
        globals_ += [module.scalar, module._reconstruct]
        break
    # numpy >= 1.25 pickles dtypes as instances of per-type classes.
    dtypes = getattr(np, 'dtypes', None)
    if dtypes is not None:
        globals_ += [
            getattr(dtypes, name) for name in dir(dtypes)
            if name.endswith('DType')
        ]
    return globals_


def mmengine_checkpoint_safe_globals() -> List[object]:
    """The types mmengine's training checkpoints hold besides tensors."""
    from mmengine.logging import HistoryBuffer
    return [HistoryBuffer, codecs.encode] + _numpy_safe_globals()


@contextlib.contextmanager
def mmengine_checkpoint_globals(extra: Sequence = ()) -> Iterator[None]:
    """Allow :func:`mmengine_checkpoint_safe_globals` (and ``extra``) for
    the loads inside.

    Only the types not already allowed are added, and only those are
    removed on exit (torch's own ``safe_globals`` removes all it was given),
    so nesting this, or a user's own registration, is safe.
    """
    allowed = set(torch.serialization.get_safe_globals())
    missing = []
    for g in mmengine_checkpoint_safe_globals() + list(extra):
        if g not in allowed and g not in missing:
            missing.append(g)
    with torch.serialization.safe_globals(missing):
        yield


#: Marks a ``HistoryBuffer`` written as plain data in a checkpoint.
HISTORY_BUFFER_TAG = 'mmlocat.HistoryBuffer'


def history_buffer_for_saving(buffer) -> dict:
    """A ``HistoryBuffer`` as plain data (tensors, ints): what any
    weights-only load reads without allow-listing anything, so the hosts'
    own ``tools/test.py`` reads mmlocat's checkpoints.
    :func:`history_buffer_from_saved` rebuilds it (bit for bit)."""
    return {
        'type': HISTORY_BUFFER_TAG,
        'log_history': torch.from_numpy(np.array(buffer._log_history)),
        'count_history': torch.from_numpy(np.array(buffer._count_history)),
        'max_length': int(buffer.max_length),
    }


def history_buffer_from_saved(value):
    """The ``HistoryBuffer`` :func:`history_buffer_for_saving` wrote, or
    ``value`` itself when it is not one."""
    if not (isinstance(value, dict)
            and value.get('type') == HISTORY_BUFFER_TAG):
        return value
    from mmengine.logging import HistoryBuffer
    return HistoryBuffer(
        value['log_history'].numpy(),
        value['count_history'].numpy(),
        max_length=value['max_length'])


def torch_load(source: Union[str, IO[bytes]],
               extra_globals: Sequence = (),
               mmap: bool = False) -> Any:
    """``torch.load`` with the weights-only unpickler, on CPU.

    mmengine's message-hub types (:func:`mmengine_checkpoint_globals`) and
    ``extra_globals`` are allowed for this load only. Errors are torch's
    (the callers turn them into messages naming the file).

    Args:
        source: A path or an open binary file (a file object keeps torch
            from going by the name, e.g. ``.safetensors``).
        extra_globals: More plain types to allow (e.g.
            ``argparse.Namespace``).
        mmap: Map the file instead of reading its tensors (zip format
            only).
    """
    with mmengine_checkpoint_globals(extra_globals):
        return torch.load(
            source, map_location='cpu', weights_only=True, mmap=mmap)


def load_array(path: str) -> np.ndarray:
    """Read one ``.npy`` array without unpickling anything.

    Raises:
        ValueError: Naming ``path`` if it is an ``.npz`` archive, holds an
            object array (which only a pickle can hold), or is not a
            readable ``.npy`` file.
    """
    with open(path, 'rb') as f:
        head = f.read(6)
    if head[:4] == b'PK\x03\x04':
        raise ValueError(f'{path} is an .npz archive (a zip of arrays), '
                         'not a single .npy array: save the array with '
                         'numpy.save')
    if head != b'\x93NUMPY':
        raise ValueError(f'{path} is not a .npy file (first bytes '
                         f'{head!r}): save the array with numpy.save')
    try:
        return np.load(path, allow_pickle=False)
    except ValueError as e:
        if 'allow_pickle' in str(e):
            raise ValueError(
                f'{path} holds an object array (Python objects stored as '
                'a pickle), which mmlocat never unpickles; save a numeric '
                'array') from None
        raise ValueError(f'{path} is a .npy file that cannot be read '
                         f'(truncated or corrupt?): {e}') from None


# --- TorchScript archives, read as data -----------------------------------
# A TorchScript archive is a zip: PREFIX/data.pkl pickles the module tree
# (objects of ``__torch__.*`` classes whose state is a dict of attributes;
# tensors as ``torch._utils._rebuild_tensor_v2`` of storages kept as the
# records PREFIX/data/KEY), and PREFIX/code/ holds each class's TorchScript
# source, whose ``__parameters__`` / ``__buffers__`` lists say which tensor
# attributes the state dict has. The unpickler below resolves no global but
# tensor rebuilding, storage dtypes, ``OrderedDict`` and inert placeholders
# for the ``__torch__`` classes; the source is parsed (``ast``), never run.


class _ScriptObject:
    """An inert stand-in for an object of a TorchScript class."""
    qualified_name = ''

    def __init__(self, *args, **kwargs) -> None:
        self.state = None

    def __setstate__(self, state) -> None:
        self.state = state


class _StorageType:
    """What a ``torch.<Name>Storage`` global means here: its dtype."""

    def __init__(self, name: str) -> None:
        if not name.endswith('Storage') or not hasattr(torch, name):
            raise pickle.UnpicklingError(f'unknown storage type {name}')
        self.dtype = getattr(torch, name).dtype


def _rebuild_tensor(storage, offset, size, stride, *unused) -> torch.Tensor:
    return torch.empty(
        (0, ), dtype=storage.dtype).set_(storage.untyped_storage(), offset,
                                         size, stride)


def _identity(value, *unused):
    return value


_TORCHSCRIPT_GLOBALS = {
    ('torch._utils', '_rebuild_tensor_v2'):
    _rebuild_tensor,
    ('torch._utils', '_rebuild_parameter'):
    _identity,
    ('collections', 'OrderedDict'):
    OrderedDict,
    # typed containers of TorchScript pickles: the value itself
    ('torch.jit._pickle', 'build_intlist'):
    _identity,
    ('torch.jit._pickle', 'build_tensorlist'):
    _identity,
    ('torch.jit._pickle', 'build_doublelist'):
    _identity,
    ('torch.jit._pickle', 'build_boollist'):
    _identity,
    ('torch.jit._pickle', 'restore_type_tag'):
    _identity,
}


class _ArchiveUnpickler(pickle.Unpickler):
    """Unpickles a TorchScript ``data.pkl`` into placeholders and tensors.

    Safe because ``find_class`` is the only way a pickle reaches a callable
    and it returns nothing but the functions of ``_TORCHSCRIPT_GLOBALS``
    (pure tensor / container builders), storage dtypes and fresh
    ``_ScriptObject`` classes; every other global is refused.
    """

    def __init__(self, file, archive: zipfile.ZipFile, prefix: str,
                 path: str) -> None:
        super().__init__(file)
        self.archive, self.prefix, self.path = archive, prefix, path
        self.storages: Dict[str, torch.Tensor] = {}
        self.classes: Dict[str, type] = {}

    def find_class(self, module: str, name: str):
        if (module, name) in _TORCHSCRIPT_GLOBALS:
            return _TORCHSCRIPT_GLOBALS[(module, name)]
        if module == 'torch' and name.endswith('Storage'):
            return _StorageType(name)
        if module == '__torch__' or module.startswith('__torch__.'):
            qualified = f'{module}.{name}'
            if qualified not in self.classes:
                self.classes[qualified] = type(name, (_ScriptObject, ),
                                               {'qualified_name': qualified})
            return self.classes[qualified]
        raise pickle.UnpicklingError(
            f'{self.path}: the archive names {module}.{name}, which a '
            'TorchScript archive of tensors does not need; refusing it')

    def persistent_load(self, pid):
        if (not isinstance(pid, tuple) or len(pid) != 5 or pid[0] != 'storage'
                or not isinstance(pid[1], _StorageType)):
            raise pickle.UnpicklingError(
                f'{self.path}: unknown persistent record {pid!r}')
        _, storage_type, key, _, numel = pid
        if key not in self.storages:
            record = f'{self.prefix}data/{key}'
            raw = bytearray(self.archive.read(record))
            dtype = storage_type.dtype
            itemsize = torch.empty((), dtype=dtype).element_size()
            if len(raw) != numel * itemsize:
                raise ValueError(
                    f'{self.path}: record {record} has {len(raw)} bytes, '
                    f'{numel} x {itemsize} expected (truncated?)')
            self.storages[key] = (
                torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(
                    (0, ), dtype=dtype))
        return self.storages[key]


def _declared_tensors(archive: zipfile.ZipFile, prefix: str, qualified: str,
                      path: str) -> Optional[List[str]]:
    """The ``__parameters__`` + ``__buffers__`` names of a module class,
    read from its TorchScript source without running it (``None``: the
    class is not a module)."""
    module, _, name = qualified.rpartition('.')
    record = f'{prefix}code/{module.replace(".", "/")}.py'
    try:
        tree = ast.parse(archive.read(record).decode('utf-8'))
    except (KeyError, SyntaxError, UnicodeDecodeError) as e:
        raise ValueError(f'{path}: cannot read the source of {qualified} '
                         f'({record}: {e}) to tell its parameters') from e
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            lists = {
                stmt.targets[0].id: stmt.value
                for stmt in node.body
                if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
            }
            if '__parameters__' not in lists:
                return None
            try:
                return [
                    n for key in ('__parameters__', '__buffers__')
                    for n in ast.literal_eval(lists.get(key, ast.List([])))
                ]
            except ValueError as e:
                raise ValueError(f'{path}: {record} declares {name}\'s '
                                 f'tensors in an unknown form: {e}') from e
    raise ValueError(f'{path}: {record} does not define {name}')


def read_torchscript_state_dict(path: str) -> 'OrderedDict[str, Any]':
    """The state dict of a TorchScript archive, without running its code.

    Equal (keys, order, values) to ``torch.jit.load(path).state_dict()``
    for archives written by ``torch.jit.save``: every module's parameters
    and buffers as its source declares them, then its submodules'.

    Raises:
        ValueError: Naming ``path`` if the archive is corrupt, refers to
            anything but tensors and TorchScript classes, or its byte
            order is not this machine's.
    """
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as e:
        raise ValueError(f'{path} is not a readable TorchScript archive: '
                         f'{e}') from e
    with archive:
        names = archive.namelist()
        data = [
            n for n in names if n.count('/') == 1 and n.endswith('/data.pkl')
        ]
        if len(data) != 1:
            raise ValueError(f'{path} is not a TorchScript archive (no '
                             'single PREFIX/data.pkl record)')
        prefix = data[0][:-len('data.pkl')]
        if f'{prefix}byteorder' in names:
            order = archive.read(f'{prefix}byteorder').decode().strip()
            if order != sys.byteorder:
                raise ValueError(f'{path} was written {order}-endian; this '
                                 f'machine is {sys.byteorder}-endian')
        try:
            with archive.open(data[0]) as f:
                root = _ArchiveUnpickler(f, archive, prefix, path).load()
        except (pickle.UnpicklingError, EOFError, KeyError, zipfile.BadZipFile,
                TypeError, AttributeError) as e:
            raise ValueError(f'{path} is a TorchScript archive that cannot '
                             f'be read as data: {e}') from e
        declared: Dict[str, Optional[List[str]]] = {}

        def tensors_of(obj: _ScriptObject) -> Optional[List[str]]:
            name = obj.qualified_name
            if name not in declared:
                declared[name] = _declared_tensors(archive, prefix, name, path)
            return declared[name]

        state_dict: 'OrderedDict[str, Any]' = OrderedDict()
        if not isinstance(root, _ScriptObject) or tensors_of(root) is None:
            raise ValueError(f'{path}: the archive\'s data is not a module')
        _collect(root, '', tensors_of, path, state_dict)
    return state_dict


def _collect(obj: _ScriptObject, key_prefix: str, tensors_of: Callable,
             path: str, out: Dict) -> None:
    """Add a module's declared tensors, then its submodules', to ``out``
    (the order of ``ScriptModule.state_dict``)."""
    state = obj.state
    if not isinstance(state, dict):
        raise ValueError(f'{path}: {obj.qualified_name} keeps a custom '
                         'state, which cannot be read as data')
    for name in tensors_of(obj):
        value = state.get(name)
        if value is not None:  # an optional bias may be None
            if not isinstance(value, torch.Tensor):
                raise ValueError(f'{path}: {key_prefix}{name} is declared a '
                                 f'tensor but holds {type(value).__name__}')
            out[key_prefix + name] = value
    for name, value in state.items():
        if isinstance(value, _ScriptObject) and tensors_of(value) is not None:
            _collect(value, f'{key_prefix}{name}.', tensors_of, path, out)
