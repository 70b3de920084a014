"""Launcher helpers shared by ``tools/train.py`` and ``tools/test.py``
(and, for configs and their overrides, ``tools/infer.py`` and
``tools/misc/check_dataset.py``).

What a run gets from its config (hooks, loops, data checks) is
:mod:`mmlocat.engine.runtime`; these are what only a launcher can do.
"""
import argparse
import difflib
import errno
import glob
import inspect
import os
import os.path as osp
from typing import Dict, List, Optional, Sequence, Tuple

from mmengine.config import Config, DictAction

from .checkpoint_io import CheckpointWriteError, write_atomic

__all__ = [
    'enable_amp', 'load_config', 'resolve_resume', 'launcher_rank',
    'EarlierRunError', 'ToolConfig', 'add_cfg_options', 'merge_cfg_options',
    'check_component_arguments', 'NEW_KEYS_OPTION'
]

FORMAT_ENV = 'MMLOCAT_FORMAT_CONFIG'
#: The option that lets ``--cfg-options`` add top-level keys on purpose.
NEW_KEYS_OPTION = '--cfg-new-keys'


def enable_amp(cfg: Config) -> None:
    """Switch the config's optimizer wrapper to mixed precision."""
    optim_wrapper = cfg.optim_wrapper.get('type', 'OptimWrapper')
    if optim_wrapper == 'AmpOptimWrapper':
        return
    if optim_wrapper != 'OptimWrapper':
        raise ValueError('--amp is only supported with OptimWrapper, '
                         f'but the config uses {optim_wrapper}')
    cfg.optim_wrapper.type = 'AmpOptimWrapper'
    cfg.optim_wrapper.setdefault('loss_scale', 'dynamic')


# What to do about a failed config dump, by errno (the cause itself is
# worded by write_atomic).
_DUMP_FIXES = {
    errno.EFBIG: 'raise the file size limit (ulimit -f)',
    errno.ENOSPC: 'free disk space',
    errno.EDQUOT: 'free space within the disk quota',
}


class ToolConfig(Config):
    """The tools' ``Config``: its ``.py`` dump is complete or absent and
    a failure names the file.

    The Runner dumps its config to ``work_dir/<config>.py`` (and the
    local visualizer backend to ``vis_data/config.py``) through
    ``Config.dump``, whose bare ``open`` / ``write`` fails with an
    ``OSError`` naming no file when the disk is full or ``ulimit -f`` is
    reached, and leaves half a config behind. Here the text is written by
    :func:`~mmlocat.utils.checkpoint_io.write_atomic`. Other formats are
    mmengine's.
    """

    def dump(self, file=None):
        file = None if file is None else str(file)
        if file is None or not file.endswith('.py'):
            return super().dump(file)
        data = self.pretty_text.encode('utf-8')
        try:
            write_atomic(file, lambda f: f.write(data))
        except CheckpointWriteError as err:
            fix = _DUMP_FIXES.get(err.errno, 'make the folder writable')
            error = CheckpointWriteError(
                f'{err} (the copy of the config the run keeps): {fix} and '
                'run again')
            error.errno = err.errno
            raise error from err
        return None


def load_config(path: str) -> Config:
    """``Config.fromfile`` for the tools, with yapf formatting optional.

    mmengine formats the config text with yapf every time it is logged or
    dumped (the Runner's start, ``work_dir/<config>.py``, every checkpoint's
    meta): about a second per call on a slow CPU. ``MMLOCAT_FORMAT_CONFIG=0``
    (the test suite sets it for tool subprocesses) keeps mmengine's
    unformatted text, which is the same valid, loadable Python config,
    only not line-wrapped. Unset or ``1``: formatted, as mmengine does.

    Raises:
        ValueError: If ``MMLOCAT_FORMAT_CONFIG`` is not '0' or '1'.
    """
    value = os.environ.get(FORMAT_ENV, '1')
    if value not in ('0', '1'):
        raise ValueError(f'{FORMAT_ENV} must be 0 or 1, got {value!r}')
    cfg = Config.fromfile(path)
    # fromfile ignores its format_python_code for non-lazy configs (mmengine
    # 0.10.7), so the flag is set on an equal config here; a ToolConfig, so
    # that the Runner's dump of it names the file when it fails
    return ToolConfig(
        cfg.to_dict(),
        cfg_text=cfg.text,
        filename=cfg.filename,
        env_variables=cfg.env_variables,
        format_python_code=value == '1')


#: Top-level keys that mean something to the Runner or to mmlocat's tools
#: although a config may not have them (besides ``Runner.__init__``'s
#: arguments): the Runner reads them with ``cfg.get``; ``runner_type``
#: picks a Runner class; ``check_data`` / ``checked_dataset``: mmlocat.
_RUNTIME_KEYS = ('model_wrapper_cfg', 'find_unused_parameters', 'sync_bn',
                 'compile', 'activation_checkpointing',
                 'efficient_conv_bn_eval', 'runner_type', 'custom_imports',
                 'check_data', 'checked_dataset')


def _known_top_keys(cfg: Config) -> List[str]:
    """The top-level keys an override may set: the config's own and those
    the Runner and the tools read (:data:`_RUNTIME_KEYS`)."""
    from mmengine.runner import Runner
    runner = [
        name for name in inspect.signature(Runner.__init__).parameters
        if name not in ('self', 'cfg')
    ]
    return sorted(set(cfg.keys()) | set(runner) | set(_RUNTIME_KEYS))


class _CfgOptionsAction(DictAction):
    """mmengine's ``DictAction`` with an item that is not ``KEY=VALUE``
    named (mmengine fails on it with a bare unpacking error): usually a
    positional argument written after ``--cfg-options``, which takes every
    word up to the next option."""

    def __call__(self, parser, namespace, values, option_string=None):
        for item in values:
            if '=' not in item:
                parser.error(
                    f'{option_string} {item!r} is not KEY=VALUE: a '
                    f'positional argument after {option_string} is read as '
                    'one of its items; put it before the option')
        super().__call__(parser, namespace, values, option_string)


def add_cfg_options(parser: argparse.ArgumentParser,
                    new_keys: bool = True) -> None:
    """Declare ``--cfg-options`` and (``new_keys``) ``--cfg-new-keys``, as
    every tool that takes config overrides names them.

    With ``new_keys`` the tool applies the overrides by
    :func:`merge_cfg_options`.
    """
    checked = ('; a top-level key the config does not have is refused '
               f'(a typo would be ignored) unless {NEW_KEYS_OPTION} names it')
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        action=_CfgOptionsAction,
        help='override settings of the config, key=value pairs' +
        (checked if new_keys else ''))
    if new_keys:
        parser.add_argument(
            NEW_KEYS_OPTION,
            nargs='+',
            default=[],
            metavar='KEY',
            help='top-level keys that --cfg-options adds to the config on '
            'purpose')


def merge_cfg_options(cfg: Config,
                      options: Optional[Dict] = None,
                      new_keys: Sequence[str] = ()) -> None:
    """Apply ``--cfg-options`` to ``cfg``, refusing unknown top-level keys.

    mmengine's ``merge_from_dict`` creates any key it is given, so a typo
    in a top-level key (``test_dataloder.dataset.data_root=...``) would be
    ignored by everything that reads the config: the run evaluates or
    trains on the config's own settings. The one check of every tool's
    overrides.

    Args:
        cfg: The loaded config, changed in place.
        options: ``{dotted key: value}`` (``DictAction``'s); None or empty
            does nothing.
        new_keys: Top-level keys the overrides may add (``--cfg-new-keys``).

    Raises:
        ValueError: A key whose first part is neither the config's, nor a
            key the Runner or the tools read, nor in ``new_keys``; naming
            the option, the config, the closest existing key and the
            escape.
    """
    if not options:
        return
    known = _known_top_keys(cfg)
    allowed = set(known) | set(new_keys)
    for key in options:
        top = str(key).split('.')[0]
        if top in allowed:
            continue
        close = difflib.get_close_matches(top, known, n=1)
        hint = f'did you mean {close[0]!r}? ' if close else ''
        raise ValueError(
            f'--cfg-options {key}: {cfg.filename} has no top-level key '
            f'{top!r} (the override would be ignored); {hint}to add the key '
            f'on purpose, pass {NEW_KEYS_OPTION} {top}')
    cfg.merge_from_dict(options)


def add_data_root_option(parser: argparse.ArgumentParser) -> None:
    """Declare ``--data-root DIR`` (:func:`apply_data_root`), as every tool
    that reads a config's data names it."""
    parser.add_argument(
        '--data-root',
        metavar='DIR',
        help='read the data from DIR instead of ./data: every path of the '
        'config under data/ (datasets, nested datasets, evaluator '
        'annotation files, embedding files) moves to the same path under '
        'DIR; each change is printed')


def apply_data_root(cfg: Config, root: Optional[str]) -> List[str]:
    """``--data-root``: :func:`mmlocat.utils.data_root.retarget_data_root`,
    each change printed; nothing without ``root``.

    Returns:
        The printed lines.
    """
    if not root:
        return []
    from .data_root import retarget_data_root
    lines = retarget_data_root(cfg, root)
    for line in lines:
        print(f'--data-root: {line}')
    return lines


def _registered(registry, type_, scope: Optional[str]):
    """The class ``type_`` names in ``registry`` under ``scope`` (None if
    it is not registered: the Runner reports that itself)."""
    if not isinstance(type_, str):
        return type_ if inspect.isclass(type_) else None
    with registry.switch_scope_and_registry(scope) as found:
        return found.get(type_)


def _accepted(cls) -> Optional[List[str]]:
    """The keyword arguments ``cls(...)`` accepts, or None when it takes
    any (``**kwargs``) and forwards them where they cannot be checked.

    mmengine's ``CheckpointHook`` takes ``**kwargs`` but hands them to
    ``Runner.save_checkpoint`` together with every argument that takes:
    any other keyword fails there, at the first save.
    """
    from mmengine.hooks import CheckpointHook
    params = inspect.signature(cls.__init__).parameters.values()
    if any(p.kind is p.VAR_KEYWORD
           for p in params) and not issubclass(cls, CheckpointHook):
        return None
    return [
        p.name for p in params
        if p.name != 'self' and p.kind in (p.POSITIONAL_OR_KEYWORD,
                                           p.KEYWORD_ONLY)
    ]


def _check_arguments(cls, args: Dict, where: str,
                     ignored: Sequence[str]) -> None:
    accepted = _accepted(cls)
    if accepted is None:
        return
    for key in args:
        if key in accepted or key in ignored or str(key).startswith('_'):
            continue
        close = difflib.get_close_matches(str(key), accepted, n=1)
        hint = f'did you mean {close[0]!r}? ' if close else ''
        raise ValueError(
            f'{where}.{key}: {cls.__name__} takes no argument {key!r}; '
            f'{hint}it takes {", ".join(accepted)} (fix the config or '
            '--cfg-options)')


def check_component_arguments(cfg: Config) -> None:
    """Check the keyword arguments of the config's hooks and loops
    against their classes' ``__init__`` before the Runner builds them.

    A misspelt keyword (``default_hooks.checkpoint.intervl=1``) would
    otherwise fail when the object is built, or, for mmengine's
    ``CheckpointHook``, at its first save thousands of iterations later.
    Checked: ``default_hooks``, ``custom_hooks``, ``train_cfg`` /
    ``val_cfg`` / ``test_cfg`` (the loop the Runner would build, also
    without a ``type``). Classes taking ``**kwargs`` are not checked
    (except ``CheckpointHook``, see :func:`_accepted`), nor types the
    registry of the config's ``default_scope`` does not know.

    Raises:
        ValueError: Naming the config key, the keyword, the closest
            valid keyword and the class's arguments.
    """
    from mmengine.registry import HOOKS, LOOPS
    from mmengine.runner import (EpochBasedTrainLoop, IterBasedTrainLoop,
                                 TestLoop, ValLoop)
    scope = cfg.get('default_scope', None)
    hooks = [(f'default_hooks.{name}', hook)
             for name, hook in (cfg.get('default_hooks', None) or {}).items()]
    hooks += [(f'custom_hooks.{i}', hook)
              for i, hook in enumerate(cfg.get('custom_hooks', None) or [])]
    for where, hook in hooks:
        if isinstance(hook, dict):
            cls = _registered(HOOKS, hook.get('type'), scope)
            if cls is not None:
                _check_arguments(cls, hook, where, ('type', 'priority'))
    # the loop the Runner builds without a type (Runner.build_*_loop), and
    # the arguments it gives itself
    defaults = dict(train_cfg=None, val_cfg=ValLoop, test_cfg=TestLoop)
    given = ('type', 'runner', 'dataloader', 'evaluator')
    for key, default in defaults.items():
        loop = cfg.get(key, None)
        if not isinstance(loop, dict) or not loop:
            continue
        if 'type' in loop:
            cls = _registered(LOOPS, loop['type'], scope)
        elif key == 'train_cfg':
            cls = (
                EpochBasedTrainLoop
                if loop.get('by_epoch', False) else IterBasedTrainLoop)
        else:
            cls = default
        if cls is not None:
            _check_arguments(
                cls, loop, key,
                given + (('by_epoch', ) if 'type' not in loop else ()))


class EarlierRunError(FileExistsError):
    """A fresh run would write over the checkpoints of an earlier run."""


def _earlier_checkpoint(work_dir: str, latest: Optional[str]) -> Optional[str]:
    """The earlier run's checkpoint to name: what ``last_checkpoint``
    names, else the newest ``*.pth`` file of the work dir (``None``: none;
    a folder of that name is no checkpoint)."""
    if latest is not None:
        return latest
    found = [
        f for f in glob.glob(osp.join(glob.escape(work_dir), '*.pth'))
        if osp.isfile(f)
    ]
    return max(found, key=osp.getmtime) if found else None


def resolve_resume(work_dir: str,
                   resume: Optional[str],
                   overwrite: bool = False) -> Tuple[bool, Optional[str]]:
    """Check a ``--resume`` request before anything starts.

    A fresh run (no ``resume``) into a work dir that holds an earlier
    run's checkpoints (``last_checkpoint`` or a ``*.pth``) is refused:
    mmengine would replace ``iter_N.pth`` / ``epoch_N.pth`` and
    ``last_checkpoint`` one by one, leaving a mix of both runs. The user
    chooses: ``--resume`` continues that run, ``overwrite`` starts over.

    Args:
        work_dir: The run's work dir.
        resume: ``None`` (no ``--resume``), ``'auto'`` (the latest
            checkpoint of the work dir) or a checkpoint path.
        overwrite: Start a fresh run even over an earlier run's
            checkpoints (``tools/train.py --overwrite``).

    Returns:
        ``(resume, note)``: whether the Runner resumes, and a warning to
        show when it does not although asked to (no checkpoint in the work
        dir), or what ``overwrite`` allows.

    Raises:
        EarlierRunError: A fresh run over an earlier run's checkpoints
            without ``overwrite``; names the checkpoint and both options.
        FileNotFoundError: If ``resume`` is a local path that does not
            exist, or ``last_checkpoint`` names a missing file.
        IsADirectoryError: If ``resume`` is a folder.
    """
    pointer = osp.join(work_dir, 'last_checkpoint')
    latest = None
    if osp.isfile(pointer):
        with open(pointer) as f:
            latest = f.read().strip() or None
    if resume is None:
        earlier = _earlier_checkpoint(work_dir, latest)
        if earlier is None:
            return False, None
        if not overwrite:
            raise EarlierRunError(
                f'{work_dir} holds the checkpoints of an earlier run '
                f'({earlier}); a fresh run would overwrite them: pass '
                '--resume to continue that run, --overwrite to start from '
                'the beginning and overwrite them, or use another '
                '--work-dir')
        return False, (
            f'--overwrite: this run starts from the beginning in {work_dir}, '
            f'which holds the checkpoints of an earlier run ({earlier}): '
            'each checkpoint this run saves replaces the earlier one of the '
            'same name, and last_checkpoint will name this run\'s')
    if resume != 'auto':
        if '://' not in resume:  # remote stores: mmengine's backend reads
            if osp.isdir(resume):
                raise IsADirectoryError(f'--resume: {resume} is a '
                                        'directory, not a checkpoint file')
            if not osp.isfile(resume):
                raise FileNotFoundError(
                    f'--resume: checkpoint not found: {resume}')
        return True, None
    if latest is None:
        return False, (f'--resume: no checkpoint to resume from in '
                       f'{work_dir} (no last_checkpoint file): training '
                       'starts from the beginning')
    if '://' not in latest and not osp.isfile(latest):
        raise FileNotFoundError(
            f'--resume: {pointer} names {latest}, which does not exist '
            '(moved or deleted?); pass --resume PATH to choose a checkpoint')
    return True, None


def launcher_rank(launcher: str) -> int:
    """This process's global rank, from the launcher's environment.

    Known before any process group exists (so rank 0 alone can take the
    work-dir lock): torchrun's ``RANK``, slurm's ``SLURM_PROCID``, Open
    MPI's ``OMPI_COMM_WORLD_RANK`` (or ``PMI_RANK``); 0 without a launcher.
    """
    keys = dict(
        pytorch=('RANK', ),
        slurm=('SLURM_PROCID', ),
        mpi=('OMPI_COMM_WORLD_RANK', 'PMI_RANK')).get(launcher, ())
    for key in keys:
        if os.environ.get(key, '').isdigit():
            return int(os.environ[key])
    return 0
