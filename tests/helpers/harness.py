"""The one way tests run a repository tool or load a shipped config.

* :func:`run_tool` runs ``python SCRIPT ARGV`` in this process (the script
  as ``__main__``, ``sys.argv`` set, in ``cwd``, with ``env`` set): no
  interpreter start, no torch / host imports, and ``pkg::`` config lookups
  cached for the session. Its result has the shape of
  :class:`subprocess.CompletedProcess` (``returncode``, ``stdout``,
  ``stderr``; ``output`` is both, interleaved as printed).
* ``run_tool(..., isolate='why')`` runs it as a subprocess instead, only
  where the process is the point: signals, preemption, DDP / torchrun,
  work-dir locks, import side effects, set-up scripts, environment
  isolation. The reason is required and documents the call.
* :func:`start_tool` is the ``Popen`` of the same subprocess, for a test
  that talks to the running process (sends it a signal).
* :func:`shipped_config`: a deep copy of a shipped config, parsed once per
  session.

An in-process run starts as a fresh process would: mmengine's global
instances (loggers, message hubs, visualizers, the default scope) are set
aside for the run and put back after it, so a second run never reuses the
first one's logger (mmengine names a Runner's logger by the second it
starts) or its captured streams; the loggers the run made are closed.
"""
import contextlib
import copy
import ctypes
import functools
import gc
import io
import logging
import os
import os.path as osp
import runpy
import subprocess
import sys
import tempfile
import traceback
import warnings
from typing import Dict, Iterator, List, Mapping, Optional, Sequence, Tuple
from unittest import mock

REPO_ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
EXTERNAL_CFG_PATH = 'mmengine.config.config._get_external_cfg_path'
# what the test process and a tool's subprocess both run with
TOOL_ENV = {'OMP_NUM_THREADS': '1', 'MMLOCAT_FORMAT_CONFIG': '0'}
DEFAULT_TIMEOUT = 600


class ToolResult(subprocess.CompletedProcess):
    """A finished tool run: ``returncode``, ``stdout``, ``stderr`` and
    ``output`` (stdout and stderr as they interleaved; in a subprocess run
    stdout then stderr)."""

    def __init__(self,
                 args: List[str],
                 returncode: int,
                 stdout: str,
                 stderr: str,
                 output: Optional[str] = None) -> None:
        super().__init__(args, returncode, stdout, stderr)
        self.output = stdout + stderr if output is None else output

    def exits(self, code: int, tail: int = 3000) -> 'ToolResult':
        """This result, asserting its exit status is ``code`` (a failure
        shows the last ``tail`` characters of the output)."""
        assert self.returncode == code, (
            f'{" ".join(self.args[1:])[:300]}: exit status '
            f'{self.returncode}, not {code}\n{self.output[-tail:]}')
        return self

    def ok(self, tail: int = 3000) -> str:
        """The output of a run that must have succeeded."""
        return self.exits(0, tail).output


# ------------------------------------------------------------- configs
@functools.lru_cache(maxsize=None)
def _external_cfg_path(package_path: str, cfg_file: str):
    from mmengine.config.utils import _get_external_cfg_path
    try:
        return _get_external_cfg_path(package_path, cfg_file), None
    except ValueError as err:
        return None, err


def cached_external_cfg_path(package_path: str, cfg_file: str) -> str:
    """mmengine's lookup of ``pkg::name`` in the package's metafiles, once
    per name: mmengine reads all ~60 metafiles of mmseg / mmdet on every
    lookup (also for each ``_base_``, where it fails and falls back to the
    base path), most of the time of parsing a config here."""
    path, err = _external_cfg_path(package_path, cfg_file)
    if err is not None:
        raise err
    return path


def _config_path(path: str) -> str:
    full = path if osp.isabs(path) else osp.join(REPO_ROOT, path)
    if not osp.isfile(full):
        raise FileNotFoundError(
            f'shipped_config: no config {full}: name it relative to the '
            'repository root (configs/...py) in a source checkout')
    return osp.normpath(full)


@functools.lru_cache(maxsize=None)
def _parsed(path: str):
    from mmengine.config import Config
    with mock.patch(EXTERNAL_CFG_PATH, cached_external_cfg_path):
        return Config.fromfile(path)


def shipped_config(path: str):
    """A fresh deep copy of the mmengine ``Config`` at ``path`` (relative
    to the repository root, or absolute), parsed once per session.

    Raises:
        FileNotFoundError: If there is no such file.
    """
    return copy.deepcopy(_parsed(_config_path(path)))


# ------------------------------------------------------------- tools
def _script(script: str) -> str:
    path = script if osp.isabs(script) else osp.join(REPO_ROOT, script)
    if not osp.isfile(path):
        raise FileNotFoundError(f'run_tool: no script {path}')
    return path


def tool_env(
        env: Optional[Mapping[str, Optional[str]]] = None) -> Dict[str, str]:
    """The environment of a tool's subprocess: the test's, the venv first
    on ``PATH``, this checkout first on ``PYTHONPATH``, one thread
    (:data:`TOOL_ENV`, unless the test's environment sets them), then
    ``env`` (a ``None`` value removes the variable)."""
    out = dict(os.environ)
    out['PATH'] = osp.dirname(sys.executable) + os.pathsep + out['PATH']
    out['PYTHONPATH'] = REPO_ROOT + os.pathsep + out.get('PYTHONPATH', '')
    for key, value in TOOL_ENV.items():
        out.setdefault(key, value)
    out['MKL_NUM_THREADS'] = out['OMP_NUM_THREADS']
    for key, value in (env or {}).items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = str(value)
    return out


def _command(script: str, argv: Tuple[str, ...]) -> List[str]:
    path = _script(script)
    prog = ['bash'] if path.endswith('.sh') else [sys.executable]
    return prog + [path] + [str(a) for a in argv]


def _reason(isolate: Optional[str], what: str) -> None:
    if not (isinstance(isolate, str) and isolate.strip()):
        raise ValueError(f'{what}: isolate= must say why this run needs its '
                         'own process (signals, preemption, DDP, locks, '
                         'import side effects, set-up scripts, environment)')


def run_tool(script: str,
             *argv,
             cwd: Optional[str] = None,
             isolate: Optional[str] = None,
             env: Optional[Mapping[str, Optional[str]]] = None,
             timeout: Optional[float] = DEFAULT_TIMEOUT,
             stdin: Optional[str] = None,
             merge_stderr: bool = False) -> ToolResult:
    """``python SCRIPT ARGV`` (``bash`` for ``*.sh``), in this process
    unless ``isolate`` says why it needs its own.

    Args:
        script: The tool, relative to the repository root or absolute.
        *argv: Its arguments (converted with ``str``).
        cwd: Its working directory (the repository root by default).
        isolate: Why the run is a subprocess; ``None`` runs in-process.
        env: Variables set for the run (``None`` values unset).
        timeout: Seconds a subprocess may run; an in-process run is bound
            by the test's own timeout (pytest-timeout).
        stdin: Text for a subprocess's standard input.
        merge_stderr: A subprocess writes its stderr into its stdout, so
            ``output`` keeps their order (an in-process ``output`` always
            does); ``stderr`` is then empty.

    Returns:
        The finished run (a failure is a return code, never an exception).
    """
    cwd = cwd or REPO_ROOT
    command = _command(script, argv)
    if isolate is None:
        if command[0] == 'bash' or stdin is not None:
            raise ValueError(f'run_tool {script}: a shell script or stdin '
                             'needs a subprocess: say why with isolate=')
        return run_in_process(command[1], command[2:], cwd=cwd, env=env)
    _reason(isolate, f'run_tool {script}')
    proc = subprocess.run(
        command,
        cwd=cwd,
        env=tool_env(env),
        input=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
        text=True,
        timeout=timeout)
    return ToolResult(command, proc.returncode, proc.stdout, proc.stderr or '')


def start_tool(script: str,
               *argv,
               isolate: str,
               cwd: Optional[str] = None,
               env: Optional[Mapping[str, Optional[str]]] = None,
               prefix: Sequence[str] = (),
               **popen) -> subprocess.Popen:
    """The running subprocess of :func:`run_tool` (``isolate`` required),
    for a test that acts on it while it runs; ``prefix``: a command that
    runs it (e.g. ``setpriv ...``); ``popen`` goes to
    :class:`subprocess.Popen` (stdout and stderr are pipes, text, unless
    it says otherwise)."""
    _reason(isolate, f'start_tool {script}')
    popen.setdefault('stdout', subprocess.PIPE)
    popen.setdefault('stderr', subprocess.PIPE)
    popen.setdefault('text', True)
    return subprocess.Popen([*prefix, *_command(script, argv)],
                            cwd=cwd or REPO_ROOT,
                            env=tool_env(env),
                            **popen)


# ------------------------------------------------------- in-process core
def _managed_classes() -> List[type]:
    """Every ``ManagerMixin`` class (none before mmengine is imported: a
    tool that needs no mmengine does not pay for importing it here)."""
    if 'mmengine.utils.manager' not in sys.modules:
        return []
    from mmengine.utils import ManagerMixin
    found, todo = [], [ManagerMixin]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


@contextlib.contextmanager
def new_globals_dropped() -> Iterator[None]:
    """mmengine's global instances (``ManagerMixin``: loggers, message
    hubs, visualizers, the default scope) made inside dropped after, the
    loggers among them closed; those from before kept as they are. (A
    Runner a test builds itself names its visualizer by the second it
    starts: a later test's Runner of the same second would get it, with
    its save folder in the first test's deleted tmp_path.)"""
    saved = {cls: dict(cls._instance_dict) for cls in _managed_classes()}
    try:
        yield
    finally:
        for cls in _managed_classes():
            kept = saved.get(cls, {})
            for key, instance in cls._instance_dict.items():
                if kept.get(key) is not instance and isinstance(
                        instance, logging.Logger):
                    for handler in list(instance.handlers):
                        handler.close()
                        instance.removeHandler(handler)
            cls._instance_dict.clear()
            cls._instance_dict.update(kept)


@contextlib.contextmanager
def fresh_globals() -> Iterator[None]:
    """mmengine's global instances empty inside, as in a new process, and
    put back after (:func:`new_globals_dropped`)."""
    with new_globals_dropped():
        for cls in _managed_classes():
            cls._instance_dict.clear()
        yield


@contextlib.contextmanager
def torch_safe_globals_kept() -> Iterator[None]:
    """torch's weights-only allow-list as it was before, after the run: a
    run that ends between the runtime's ``before_run`` (which allows
    mmengine's types) and its ``after_run`` (which takes them back), as a
    refused or interrupted run does, leaves them allowed; a process would
    exit, the test process goes on (later tests then read checkpoints
    with them allowed)."""
    if 'torch' not in sys.modules:
        yield
        return
    import torch
    saved = list(torch.serialization.get_safe_globals())
    try:
        yield
    finally:
        torch.serialization.clear_safe_globals()
        torch.serialization.add_safe_globals(saved)


@contextlib.contextmanager
def _cached_lookups() -> Iterator[None]:
    """:func:`cached_external_cfg_path` for mmengine's ``pkg::`` look-ups,
    where mmengine's config module is imported already (else the tool
    imports it and pays the uncached look-ups; importing it here would
    cost every tool the torch import)."""
    if 'mmengine.config.config' not in sys.modules:
        yield
        return
    with mock.patch(EXTERNAL_CFG_PATH, cached_external_cfg_path):
        yield


class _Tee(io.TextIOBase):
    """Write to several buffers (a tool's stream and the interleaved
    output); in a process forked from this one (a data loader worker),
    whose copies of the buffers nobody reads, to file descriptor ``fd``
    (captured by :func:`_fd_captured`) instead."""

    def __init__(self, fd: int, *buffers: io.StringIO) -> None:
        self.fd, self.buffers, self.pid = fd, buffers, os.getpid()

    def write(self, text: str) -> int:
        if os.getpid() != self.pid:
            os.write(self.fd, text.encode('utf-8', 'replace'))
            return len(text)
        for buffer in self.buffers:
            buffer.write(text)
        return len(text)

    def isatty(self) -> bool:
        return False


@contextlib.contextmanager
def _fd_captured(fd: int, sink: List[str]) -> Iterator[None]:
    """What is written to file descriptor ``fd`` (C libraries such as
    OpenCV, worker processes, subprocesses of the tool) goes to a file
    whose text is appended to ``sink``."""
    with tempfile.TemporaryFile() as tmp:
        saved = os.dup(fd)
        os.dup2(tmp.fileno(), fd)
        try:
            yield
        finally:
            for stream in (sys.__stdout__, sys.__stderr__):
                if stream is not None:
                    stream.flush()
            os.dup2(saved, fd)
            os.close(saved)
            tmp.seek(0)
            sink.append(tmp.read().decode('utf-8', 'replace'))


def _exit_status(code: object, stderr) -> int:
    """What the interpreter makes of ``SystemExit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=stderr)
    return 1


def _release_memory() -> None:
    """After an in-process run: free what it left in reference cycles (a
    Runner, its model, its data loaders, whose persistent worker processes
    end with them) and give freed heap back to the system, so the test
    process stays small for the runs that follow (a data loader forks this
    whole process: a full suite was once killed for memory by the workers
    of a large, grown process)."""
    gc.collect()
    try:  # glibc only
        ctypes.CDLL('libc.so.6').malloc_trim(0)
    except (OSError, AttributeError):
        pass


def run_in_process(
    path: str,
    argv: List[str],
    cwd: Optional[str] = None,
    env: Optional[Mapping[str, Optional[str]]] = None,
    patches: Tuple = ()
) -> ToolResult:
    """``python PATH ARGV`` in this process (:func:`run_tool`'s default):
    ``runpy.run_path(path, run_name='__main__')`` with ``sys.argv`` set,
    the script's folder first on ``sys.path``, in ``cwd``, ``env`` and
    :data:`TOOL_ENV` set, ``pkg::`` lookups cached, mmengine's globals
    fresh (:func:`fresh_globals`) and the warning filters put back; output
    captured, also what is written to file descriptors 1 and 2 (C
    libraries, worker processes: appended after the Python-level text),
    then passed on to pytest's capture. ``patches``: more context managers
    to enter around the run."""
    out, err, both = io.StringIO(), io.StringIO(), io.StringIO()
    fd_out: List[str] = []
    fd_err: List[str] = []
    environ = {k: v for k, v in TOOL_ENV.items() if k not in os.environ}
    environ.update(env or {})
    unset = [k for k, v in environ.items() if v is None]
    environ = {k: str(v) for k, v in environ.items() if v is not None}
    code: object = 0
    here = os.getcwd()
    stdout, stderr = sys.stdout, sys.stderr
    for stream in (stdout, stderr, sys.__stdout__, sys.__stderr__):
        if stream is not None:
            stream.flush()
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.dict(os.environ, environ))
        for key in unset:
            os.environ.pop(key, None)
        stack.enter_context(_cached_lookups())
        stack.enter_context(
            mock.patch.object(sys, 'argv', [path] + [str(a) for a in argv]))
        stack.enter_context(
            mock.patch.object(sys, 'path', [osp.dirname(path)] + sys.path))
        stack.enter_context(warnings.catch_warnings())
        stack.enter_context(fresh_globals())
        stack.enter_context(torch_safe_globals_kept())
        stack.enter_context(_fd_captured(1, fd_out))
        stack.enter_context(_fd_captured(2, fd_err))
        stack.enter_context(contextlib.redirect_stdout(_Tee(1, out, both)))
        stack.enter_context(contextlib.redirect_stderr(_Tee(2, err, both)))
        for patch in patches:
            stack.enter_context(patch)
        os.chdir(cwd or REPO_ROOT)
        try:
            runpy.run_path(path, run_name='__main__')
        except SystemExit as exc:
            code = _exit_status(exc.code, sys.stderr)
        except Exception:  # a real process prints it and exits 1
            traceback.print_exc(file=sys.stderr)
            code = 1
        finally:
            os.chdir(here)
    _release_memory()
    # output written below Python (file descriptors) follows the rest
    stdout_text = out.getvalue() + ''.join(fd_out)
    stderr_text = err.getvalue() + ''.join(fd_err)
    output = both.getvalue() + ''.join(fd_out) + ''.join(fd_err)
    # shown by pytest when the test fails
    stdout.write(output)
    return ToolResult([sys.executable, path] + [str(a) for a in argv], code,
                      stdout_text, stderr_text, output)
