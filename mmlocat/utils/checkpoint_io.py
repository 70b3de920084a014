"""Reading foreign checkpoints and loading them with an honest report.

Shared by the model converters, the backbones' ``Pretrained`` loading and
``tools/test.py``: a checkpoint may be a raw state dict or one nested under
``state_dict`` / ``model`` / ``module``, stored as ``.pth``, ``.pt``,
``.bin`` or ``.safetensors``. The file's *content* decides how it is read
(a safetensors file named ``.pth`` is read as safetensors), and a file that
is empty, truncated, a TorchScript archive or no checkpoint at all gets one
sentence saying so. Non-finite weights are refused. Loading always reports
missing, unexpected and mis-shaped keys, so a model never runs silently
half-random.
"""
import contextlib
import errno
import logging
import os
import os.path as osp
import re
import secrets
import signal
import stat
import struct
import sys
import threading
import time
import zipfile
from collections import OrderedDict
from typing import (BinaryIO, Callable, Dict, Iterable, Iterator, List,
                    NamedTuple, Optional, Sequence, Tuple)

import torch
from torch import nn

from .safe_load import read_torchscript_state_dict, torch_load
from .work_dir_lock import pid_alive

__all__ = [
    'read_checkpoint', 'read_state_dict', 'read_clip_state_dict',
    'save_checkpoint', 'strip_prefix', 'LoadReport',
    'load_state_dict_reported', 'sniff_checkpoint', 'refuse_nonfinite_weights',
    'unwrap_state_dict', 'run_cli', 'CLI_ERRORS', 'save_converted',
    'write_atomic', 'CheckpointWriteError', 'remove_stale_temporaries'
]

_NESTED_KEYS = ('state_dict', 'model', 'module', 'model_ema')
# The first pickled object of torch's legacy (pre-1.6) format is this magic
# number (a LONG1 opcode and its 10 little-endian bytes), after the PROTO
# opcode and, from protocol 4, an 8-byte FRAME.
_LEGACY_MAGIC = b'\x8a\x0a' + (0x1950a86a20f9469cfc6c).to_bytes(10, 'little')
#: Exceptions the command-line tools turn into one ``NAME: error:`` line.
CLI_ERRORS = (OSError, ValueError, RuntimeError, ImportError)


def _short(keys: List[str], limit: int = 10) -> str:
    """At most ``limit`` keys, then how many were left out."""
    shown = ', '.join(keys[:limit])
    more = len(keys) - limit
    return shown + (f', ... and {more} more' if more > 0 else '')


def sniff_checkpoint(path: str) -> str:
    """Tell what a file holds from its first bytes, not from its name.

    Args:
        path: An existing file.

    Returns:
        ``'safetensors'``, ``'torch-zip'`` (``torch.save`` since 1.6),
        ``'torchscript'`` (a ``torch.jit.save`` archive, e.g. OpenAI's CLIP
        ``.pt`` files) or ``'torch-legacy'`` (a pre-1.6 pickle).

    Raises:
        ValueError: If the file is empty, a truncated or corrupt archive, or
            none of these formats; the message says which.
    """
    size = osp.getsize(path)
    if size == 0:
        raise ValueError(f'{path} is empty (0 bytes): not a checkpoint')
    with open(path, 'rb') as f:
        head = f.read(32)
    if head[:4] == b'PK\x03\x04':
        try:
            with zipfile.ZipFile(path) as archive:
                names = archive.namelist()
        except (zipfile.BadZipFile, OSError) as e:
            raise ValueError(f'{path} is a truncated or corrupt zip archive '
                             f'(a damaged PyTorch checkpoint?): {e}') from e
        if any(n.endswith('/constants.pkl') for n in names):
            return 'torchscript'
        if any(n.endswith('/data.pkl') or n == 'data.pkl' for n in names):
            return 'torch-zip'
        raise ValueError(f'{path} is a zip archive without a PyTorch '
                         f'pickle (data.pkl): not a checkpoint; it holds '
                         f'{_short(names, 5)}')
    if len(head) >= 9 and head[8:9] == b'{':  # u64 length, JSON header
        (header_len, ) = struct.unpack('<Q', head[:8])
        if 8 + header_len <= size:
            return 'safetensors'
        raise ValueError(f'{path} is a truncated or corrupt safetensors '
                         f'file: its header needs {header_len} bytes, the '
                         f'file has {size}')
    if _is_torch_legacy(head):
        return 'torch-legacy'
    if head[:1] == b'\x80':
        raise ValueError(f'{path} is a Python pickle, not a PyTorch '
                         'checkpoint (no torch magic number); mmlocat never '
                         'unpickles such a file (it could run code)')
    raise ValueError(f'{path} is not a checkpoint: its content is neither '
                     'a PyTorch file (zip or legacy pickle) nor a '
                     f'safetensors file (first bytes {head[:8]!r})')


def _is_torch_legacy(head: bytes) -> bool:
    """Whether a pickle stream starts with torch's legacy magic number,
    told from its bytes alone (nothing is unpickled)."""
    if head[:1] != b'\x80' or head[1:2] not in (b'\x02', b'\x03', b'\x04',
                                                b'\x05'):
        return False
    body = head[2:]
    if body[:1] == b'\x95':  # FRAME + its 8-byte length (protocol >= 4)
        body = body[9:]
    return body.startswith(_LEGACY_MAGIC)


def _read_safetensors(path: str) -> dict:
    try:
        from safetensors.torch import load_file
    except ImportError as e:  # pragma: no cover - depends on env
        raise ImportError(
            'reading a safetensors file needs the '
            '`safetensors` package: pip install safetensors') from e
    try:
        return load_file(path, device='cpu')
    except Exception as e:  # SafetensorError is not a public class
        raise ValueError(f'{path} is a safetensors file that cannot be read '
                         f'(truncated or corrupt?): {e}') from e


def _read_torch(path: str, kind: str, safe_globals: Sequence = ()) -> object:
    try:
        # a file object: torch would go by a '.safetensors' name otherwise
        with open(path, 'rb') as f:
            return torch_load(f, safe_globals)
    except (RuntimeError, EOFError, OSError, zipfile.BadZipFile) as e:
        raise ValueError(f'{path} is a PyTorch file that cannot be read '
                         f'(truncated or corrupt?): {_first_line(e)}') from e
    except Exception as e:  # weights-only unpickler refusals
        raise ValueError(
            f'{path} is a PyTorch file ({kind}) holding objects other than '
            f'tensors and plain containers: {_refused(e, path)}') from e


def _refused(err: BaseException, path: str) -> str:
    """What the weights-only unpickler refused, in words (torch's message
    opens with generic advice to turn the check off)."""
    found = re.search(r'Unsupported global: GLOBAL (\S+)', str(err))
    if found is None:
        return _first_line(err)
    name = found.group(1)
    text = f'it names {name}, which weights-only loading does not build'
    if name in ('getattr', 'builtins.getattr'):
        # mmengine's HistoryBuffer pickles its statistic methods this way
        text += (' (an mmengine training checkpoint saved without '
                 "mmlocat's runtime, runner_type='mmlocat.MMLocatRunner': "
                 'its message hub pickles getattr(HistoryBuffer, ...)); if '
                 'you trust the file, keep its weights with python -c '
                 '"import torch; torch.save({\'state_dict\': torch.load('
                 f'\'{path}\', weights_only=False)[\'state_dict\']}}, '
                 '\'weights.pth\')" and use weights.pth')
    return text


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__


def unwrap_state_dict(obj: object,
                      source: str) -> 'OrderedDict[str, torch.Tensor]':
    """Unwrap ``state_dict`` / ``model`` / ``module`` nesting (twice).

    Args:
        obj: What was loaded.
        source: Name used in the error message.

    Raises:
        ValueError: If no non-empty dict of tensors is found.
    """
    for _ in range(2):  # e.g. {'model': {'state_dict': ...}}
        if isinstance(obj, dict):
            nested = [k for k in _NESTED_KEYS if isinstance(obj.get(k), dict)]
            if nested:
                obj = obj[nested[0]]
    if not isinstance(obj, dict) or not obj or not all(
            isinstance(v, torch.Tensor) for v in obj.values()):
        found = type(obj).__name__
        if isinstance(obj, dict):
            found = 'an empty dict' if not obj else (
                f'a dict with keys {_short(list(map(str, obj)), 5)}')
        raise ValueError(
            f'{source} does not contain a state dict of tensors (found '
            f'{found})')
    return OrderedDict(obj)


def refuse_nonfinite_weights(state_dict: Dict[str, torch.Tensor],
                             source: str) -> None:
    """Refuse a state dict with NaN or inf in a floating-point tensor.

    Raises:
        ValueError: Naming the tensors (and how many values) affected.
    """
    bad = []
    for key, value in state_dict.items():
        if value.is_floating_point() or value.is_complex():
            count = int((~torch.isfinite(value)).sum())
            if count:
                bad.append(f'{key} ({count} of {value.numel()})')
    if bad:
        raise ValueError(f'{source} has NaN/inf values in {len(bad)} '
                         f'tensor(s): {_short(bad)}; refusing to use it')


def read_checkpoint(path: str, safe_globals: Sequence = ()) -> object:
    """Read what a PyTorch or safetensors file holds, without unwrapping.

    The one reader of checkpoint files in mmlocat. The format is told from
    the file's bytes (:func:`sniff_checkpoint`, nothing is unpickled);
    PyTorch files are read with the weights-only unpickler
    (:func:`~mmlocat.utils.safe_load.torch_load`); ``safe_globals`` allows
    more plain types for this read only (e.g. ``argparse.Namespace``, the
    ``args`` a DINO training checkpoint stores). An ``http(s)://`` URL is
    downloaded once into torch's hub cache (``$TORCH_HOME/hub/checkpoints``,
    where ``torch.hub`` keeps it) and read as a file: mmengine's and
    torch.hub's URL loaders unpickle without the weights-only check.

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        ValueError: If ``path`` is not a non-empty string, or the file is
            empty, corrupt, a TorchScript archive or not a checkpoint
            (:func:`sniff_checkpoint`).
    """
    if not isinstance(path, str) or not path:
        raise ValueError(
            f'checkpoint must be a file path or URL, got {path!r}')
    if '://' in path:
        path = _download(path)
    if not osp.exists(path):
        raise FileNotFoundError(f'checkpoint not found: {path}')
    if not osp.isfile(path):
        raise ValueError(f'{path} is a directory, not a checkpoint file')
    kind = sniff_checkpoint(path)
    if kind == 'torchscript':
        raise ValueError(f'{path} is a TorchScript archive (torch.jit.save), '
                         'not a state dict; only the CLIP readers '
                         '(clip2mmlocat.py, the CLIP text tower) read those '
                         '(OpenAI CLIP releases)')
    if kind == 'safetensors':
        return _read_safetensors(path)
    return _read_torch(path, kind, safe_globals)


def _download(url: str) -> str:
    """The local copy of an ``http(s)://`` checkpoint (downloaded once)."""
    from urllib.parse import urlparse
    if not url.startswith(('http://', 'https://')):
        raise ValueError(f'cannot read {url}: only local files and '
                         'http(s):// URLs are read (download the file and '
                         'pass its path)')
    folder = osp.join(torch.hub.get_dir(), 'checkpoints')
    local = osp.join(folder, osp.basename(urlparse(url).path))
    if not osp.isfile(local):
        os.makedirs(folder, exist_ok=True)
        torch.hub.download_url_to_file(url, local, progress=True)
    return local


def read_state_dict(path: str,
                    finite: bool = True) -> 'OrderedDict[str, torch.Tensor]':
    """Read a state dict from a PyTorch or safetensors file (or a URL).

    The format is sniffed from the content (:func:`sniff_checkpoint`), so
    the extension does not matter.

    Args:
        path: File (or URL) to read (:func:`read_checkpoint`).
        finite: Refuse NaN / inf weights (:func:`refuse_nonfinite_weights`).

    Returns:
        The tensors of the checkpoint, unwrapped from ``state_dict`` /
        ``model`` / ``module`` nesting.

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        ValueError: If the file is empty, corrupt, a TorchScript archive,
            not a checkpoint, holds no state dict of tensors or (with
            ``finite``) holds NaN / inf weights.
    """
    state_dict = unwrap_state_dict(read_checkpoint(path), path)
    if finite:
        refuse_nonfinite_weights(state_dict, path)
    return state_dict


def read_clip_state_dict(
        path: str) -> 'Tuple[OrderedDict[str, torch.Tensor], str]':
    """Read a CLIP release file: a state dict (any :func:`read_state_dict`
    format) or OpenAI's TorchScript archive (``ViT-B-16.pt``, what
    ``clip.load(..., jit=False)`` reads).

    A TorchScript archive is read as data
    (:func:`~mmlocat.utils.safe_load.read_torchscript_state_dict`: the
    parameters and buffers ``torch.jit.load(path).state_dict()`` would
    give, without compiling or running the archive's code; a causal
    ``attn_mask`` buffer, which a traced open_clip model keeps, is
    dropped); every other PyTorch file goes through the weights-only
    reader. ``module.`` prefixes are stripped.

    Returns:
        ``(state_dict, kind)``, ``kind`` as :func:`sniff_checkpoint` says.

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        ValueError: As :func:`read_state_dict` (also for an archive that
            TorchScript cannot load or that holds NaN / inf weights).
    """
    if not osp.isfile(path):
        if osp.isdir(path):
            raise ValueError(f'{path} is a directory, not a checkpoint file')
        raise FileNotFoundError(f'checkpoint not found: {path}')
    kind = sniff_checkpoint(path)
    if kind != 'torchscript':
        state_dict = read_state_dict(path)
    else:
        # a traced open_clip model keeps its causal mask (-inf above the
        # diagonal) as a buffer: not a weight
        state_dict = unwrap_state_dict(
            {
                k: v
                for k, v in read_torchscript_state_dict(path).items()
                if not k.endswith('attn_mask')
            }, path)
        refuse_nonfinite_weights(state_dict, path)
    if all(k.startswith('module.') for k in state_dict):
        state_dict = strip_prefix(state_dict, ['module.'])
    return OrderedDict(state_dict), kind


def run_cli(name: str, main: Callable[[], None]) -> None:
    """Run a tool's ``main``; a bad input ends in one line and exit 2.

    ``NAME: error: MESSAGE`` on stderr (as argparse reports bad arguments)
    instead of a traceback, for :data:`CLI_ERRORS` and for a
    ``SystemExit('NAME: error: ...')`` raised by the tool itself.
    """
    try:
        main()
    except SystemExit as err:
        if isinstance(err.code, str) and err.code.startswith(name + ':'):
            print(err.code, file=sys.stderr)
            sys.exit(2)
        raise
    except CLI_ERRORS as err:
        message = '; '.join(line.strip() for line in str(err).splitlines()
                            if line.strip())
        print(
            f'{name}: error: {message or type(err).__name__}', file=sys.stderr)
        sys.exit(2)


def strip_prefix(state_dict: Dict[str, torch.Tensor],
                 prefixes: Iterable[str]) -> Dict[str, torch.Tensor]:
    """Remove the first matching prefix (e.g. ``module.``) from every key."""
    out = OrderedDict()
    for key, value in state_dict.items():
        for prefix in prefixes:
            if key.startswith(prefix):
                key = key[len(prefix):]
                break
        out[key] = value
    return out


class CheckpointWriteError(OSError):
    """A checkpoint (or its ``last_checkpoint`` pointer, or another file
    :func:`write_atomic` writes, e.g. a tool's config dump) could not be
    written.

    The message names the file and the cause; the file under that name is
    unchanged (the previous version, if any, is intact) and no partial
    file is left behind.
    """


# Why a write failed, in words a user can act on.
_WRITE_HINTS = {
    errno.EISDIR: 'a directory is in the way',
    errno.ENOTDIR: 'a file is in the way of a folder on the path',
    errno.ENOSPC: 'the disk is full',
    errno.EDQUOT: 'the disk quota is exceeded',
    errno.EFBIG: 'the file size limit is exceeded',
    errno.EACCES: 'the folder is not writable',
    errno.EPERM: 'the folder is not writable',
    errno.EROFS: 'the file system is read-only',
}


def write_atomic(path: str, write: Callable[[BinaryIO], None]) -> None:
    """Write a file so that ``path`` is either complete or unchanged.

    ``write`` fills a temporary file in the same folder (same file system,
    so the rename is atomic), which is flushed, ``fsync``-ed and then
    renamed over ``path`` (``os.replace``); the folder is ``fsync``-ed so
    the rename survives a power loss. A crash or a failed write (disk
    full, folder not writable, a directory named ``path``) leaves the old
    file, if any, untouched and removes the temporary file (also on
    ``KeyboardInterrupt`` and ``SystemExit``, e.g. SIGTERM under
    :func:`run_cli` or ``tools/train.py``). What only ``kill -9`` or a
    power loss leaves, :func:`remove_stale_temporaries` removes before the
    next write of ``path``. The new file gets the usual permissions
    (``0o666`` less the umask), as ``open`` would give it.

    Args:
        path: The final file.
        write: Called with the open binary temporary file.

    Raises:
        CheckpointWriteError: If any step fails; the message names
            ``path``, the cause and that nothing was changed.
    """
    path = osp.abspath(path)
    folder = osp.dirname(path)
    remove_stale_temporaries(path)
    # hidden, unique per process and call; never matched by a checkpoint
    # glob and never named by last_checkpoint
    tmp = osp.join(
        folder, f'.{osp.basename(path)}.{os.getpid()}.'
        f'{secrets.token_hex(4)}.tmp')
    try:
        if osp.isdir(path):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR),
                                    path)
        os.makedirs(folder, exist_ok=True)
        with _sigterm_as_exit():
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            with os.fdopen(fd, 'wb') as f:
                write(f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
    except BaseException as exc:
        _remove_quietly(tmp)
        # an interrupt (SystemExit, KeyboardInterrupt) stays what it is
        err = _os_error_in(exc) if isinstance(exc, Exception) else None
        if err is None:
            raise
        hint = _WRITE_HINTS.get(err.errno)
        cause = f'{hint} ({err.strerror})' if hint else str(err)
        kept = ('the previous file is unchanged'
                if osp.isfile(path) else 'nothing was written')
        error = CheckpointWriteError(f'cannot write {path}: {cause}; {kept}')
        error.errno = err.errno
        raise error from exc
    _fsync_folder(folder)


@contextlib.contextmanager
def _sigterm_as_exit() -> Iterator[None]:
    """SIGTERM ends the process through ``SystemExit(143)`` meanwhile, so
    the temporary file is removed; only where SIGTERM would kill the
    process outright (its default action, in the main thread): a handler
    someone installed (``tools/train.py``, ``PreemptionHook``) stays."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        yield
        return

    def leave(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, leave)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


#: A dead writer's temporary file younger than this is kept: on a shared
#: file system it may be a write in progress on another host (where its
#: pid cannot be checked); an interrupted write is older by the next run.
STALE_AFTER_S = 60.0


def _temporary_pid(name: str, basename: str) -> Optional[int]:
    """The writer's pid in ``.BASENAME.PID.HEX.tmp`` (also the
    ``.BASENAME.PID.tmp`` of ``lastclip2mmlocat.py``), else ``None``."""
    prefix = f'.{basename}.'
    if not (name.startswith(prefix) and name.endswith('.tmp')):
        return None
    parts = name[len(prefix):-len('.tmp')].split('.')
    if not parts[0].isdigit() or len(parts) > 2 or (
            len(parts) == 2 and not re.fullmatch(r'[0-9a-f]{8}', parts[1])):
        return None
    return int(parts[0])


def _size(nbytes: int) -> str:
    for unit in ('bytes', 'kB', 'MB', 'GB'):
        if nbytes < 1024 or unit == 'GB':
            return (f'{nbytes} {unit}'
                    if unit == 'bytes' else f'{nbytes:.1f} {unit}')
        nbytes /= 1024
    return ''  # pragma: no cover


def remove_stale_temporaries(path: str, logger=None) -> List[str]:
    """Remove the temporary files of writes of ``path`` that were killed.

    A ``kill -9`` (or a power loss) during :func:`write_atomic` leaves its
    hidden ``.NAME.PID.HEX.tmp`` next to ``path``, as large as the file
    being written. Such a file whose process is no longer running on this
    host is removed, one log line each (the file, its size, the pid).
    Files of running processes are kept, and so are files younger than
    :data:`STALE_AFTER_S` (reported instead: maybe another host's write).

    Args:
        path: The file about to be written.
        logger: Where the lines go; mmengine's current logger by default.

    Returns:
        The removed files.
    """
    folder, basename = osp.split(osp.abspath(path))
    try:
        names = os.listdir(folder)
    except OSError:
        return []  # no folder yet: nothing left over
    removed = []
    for name in sorted(names):
        pid = _temporary_pid(name, basename)
        if pid is None or pid <= 0 or pid_alive(pid):
            continue
        tmp = osp.join(folder, name)
        try:
            info = os.lstat(tmp)
        except OSError:
            continue  # another run removed it meanwhile
        if not stat.S_ISREG(info.st_mode):
            continue
        age = time.time() - info.st_mtime
        what = (f'{tmp} ({_size(info.st_size)}), the temporary file of an '
                f'interrupted write of {path} by process {pid}, which is '
                'not running on this host')
        if age < STALE_AFTER_S:
            _log(
                f'kept {what}: it was modified {age:.0f} s ago (a write on '
                'another host of a shared file system?); it is removed by a '
                'later write', logger)
            continue
        try:
            os.remove(tmp)
        except FileNotFoundError:
            continue
        except OSError as err:
            _log(f'cannot remove {what}: {err}', logger)
            continue
        _log(f'removed {what}', logger)
        removed.append(tmp)
    return removed


def _log(message: str, logger=None) -> None:
    if logger is not None:
        logger.warning(message)
        return
    from mmengine.logging import print_log  # lazily, as safe_load
    print_log(message, logger='current', level=logging.WARNING)


def _os_error_in(exc: BaseException) -> Optional[OSError]:
    """The OSError behind ``exc``: itself, or one it was raised from or
    while handling (``torch.save`` turns a failed write into a
    RuntimeError of its zip writer)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, OSError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def _remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def _fsync_folder(folder: str) -> None:
    """Persist a rename in ``folder`` (a no-op where folders can't sync)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # e.g. some network file systems refuse fsync on a folder
    finally:
        os.close(fd)


def save_checkpoint(state_dict: Dict[str, torch.Tensor],
                    path: str,
                    meta: Optional[dict] = None) -> None:
    """Save an mmengine-style checkpoint ``{'state_dict', 'meta'}``.

    The write is atomic (:func:`write_atomic`): ``path`` is complete or
    unchanged.

    Raises:
        ValueError: If a tensor holds NaN / inf (nothing is written).
        FileNotFoundError: If the output folder does not exist.
        CheckpointWriteError: If the file cannot be written.
    """
    refuse_nonfinite_weights(state_dict, 'the converted state dict')
    dirname = osp.dirname(osp.abspath(path))
    if not osp.isdir(dirname):
        raise FileNotFoundError(f'output folder does not exist: {dirname}')
    checkpoint = dict(state_dict=state_dict, meta=meta or {})
    write_atomic(path, lambda f: torch.save(checkpoint, f))


def save_converted(state_dict: Dict[str, torch.Tensor],
                   path: str,
                   src: str,
                   converter: str,
                   prefix: str = '',
                   **meta) -> int:
    """Save a converter's output under ``prefix`` with its provenance.

    The converter tools share this tail: every key gets ``prefix`` (e.g.
    ``backbone.`` for ``init_cfg=dict(type='Pretrained', prefix=...)``) and
    ``meta`` records the source file's name and the converter's name, plus
    any extra ``meta`` entries (e.g. ``clip=...``).

    Returns:
        int: The number of tensors written.
    """
    state_dict = OrderedDict(
        (prefix + key, value) for key, value in state_dict.items())
    save_checkpoint(
        state_dict,
        path,
        meta=dict(source=osp.basename(src), converter=converter, **meta))
    return len(state_dict)


class LoadReport(NamedTuple):
    """Keys that did not line up when loading a state dict."""
    missing: List[str]
    unexpected: List[str]

    def __str__(self) -> str:
        return (f'missing keys ({len(self.missing)}): {self.missing}\n'
                f'unexpected keys ({len(self.unexpected)}): '
                f'{self.unexpected}')


def _size_mismatches(err: RuntimeError) -> List[str]:
    """The ``size mismatch for KEY: ...`` lines of torch's load error."""
    return [
        line.strip() for line in str(err).splitlines()
        if line.strip().startswith('size mismatch for')
    ]


def load_state_dict_reported(module: nn.Module,
                             state_dict: Dict[str, torch.Tensor],
                             allowed_missing: Iterable[str] = (),
                             logger=None,
                             allow_unexpected: bool = False,
                             source: str = 'the checkpoint') -> LoadReport:
    """Load ``state_dict`` and refuse to leave unexplained random weights.

    Position embeddings are still resized by the module's load pre-hooks
    (mmpretrain's ``_prepare_pos_embed``); any other shape difference is an
    error.

    Args:
        module: Model to load into.
        state_dict: Tensors to load.
        allowed_missing: Key substrings that may be missing because they are
            new parameters that keep their fresh initialisation (e.g.
            ``'attn.gaug.'`` when a plain ViT is loaded into LocAtViT).
        logger: Optional logger; the report is printed if ``None``.
        allow_unexpected: Only report (not refuse) checkpoint keys the model
            does not have.
        source: Name of the checkpoint in messages.

    Returns:
        The :class:`LoadReport`.

    Raises:
        RuntimeError: If a key is missing that is not allowed, if a key is
            unexpected (unless ``allow_unexpected``), or on a shape mismatch.
    """
    allowed = tuple(allowed_missing)
    name = type(module).__name__
    try:
        result = module.load_state_dict(state_dict, strict=False)
    except RuntimeError as err:
        mismatches = _size_mismatches(err)
        if not mismatches:
            raise
        raise RuntimeError(
            f'{source} does not fit {name}: {len(mismatches)} tensor(s) have '
            'another shape (a checkpoint of another arch, patch size or '
            f'number of classes?): {_short(mismatches, 3)}') from None
    report = LoadReport(
        list(result.missing_keys), list(result.unexpected_keys))
    bad_missing = [
        k for k in report.missing if not any(a in k for a in allowed)
    ]
    new_params = [k for k in report.missing if k not in bad_missing]
    loaded = len(state_dict) - len(report.unexpected)
    message = (f'loaded {loaded} of {len(state_dict)} tensors of {source} '
               f'into {name}; missing keys ({len(report.missing)}): '
               f'[{_short(report.missing)}]; unexpected keys '
               f'({len(report.unexpected)}): [{_short(report.unexpected)}]')
    if new_params:
        message += (f'; newly initialised ({len(new_params)}): '
                    f'[{_short(new_params)}]')
    (logger.info if logger is not None else print)(message)
    if bad_missing or (report.unexpected and not allow_unexpected):
        raise RuntimeError('refusing to run a partly random network; '
                           f'unexplained keys: {message}')
    return report
