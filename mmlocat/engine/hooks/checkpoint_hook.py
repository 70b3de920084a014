"""Checkpoints that are complete or absent, never half-written.

mmengine's :class:`~mmengine.hooks.CheckpointHook` writes ``iter_N.pth``
in place (a full disk leaves a truncated file under its final name),
deletes the oldest kept checkpoint *before* writing the new one (with
``max_keep_ckpts=1`` a failed write leaves none) and then rewrites
``last_checkpoint`` in place. :class:`AtomicCheckpointHook` keeps its
options and file names and changes only that: every file goes through
:func:`mmlocat.utils.checkpoint_io.write_atomic` (a temporary file in the
same folder, ``fsync``, ``os.replace``), the outdated checkpoint is deleted
after the new one is complete, and ``last_checkpoint`` names a checkpoint
only once that checkpoint is complete. A failed write stops training with
:class:`~mmlocat.utils.checkpoint_io.CheckpointWriteError` naming the file
and the cause; the previous checkpoint and ``last_checkpoint`` are intact.
"""
import logging
import os.path as osp
from pathlib import Path
from typing import Optional, Union

from mmengine.dist import is_main_process
from mmengine.fileio import LocalBackend, get_file_backend, register_backend
from mmengine.hooks import CheckpointHook
from mmengine.logging import print_log

from mmlocat.registry import HOOKS
from mmlocat.utils.checkpoint_io import CheckpointWriteError, write_atomic

__all__ = [
    'AtomicCheckpointHook', 'AtomicLocalBackend', 'ATOMIC_BACKEND',
    'write_last_checkpoint', 'atomic_backend_args', 'save_pointed'
]

#: The mmengine file-backend name of :class:`AtomicLocalBackend`.
ATOMIC_BACKEND = 'mmlocat_atomic_local'


class AtomicLocalBackend(LocalBackend):
    """mmengine's local file backend with atomic ``put`` / ``put_text``.

    Everything mmengine writes through a file backend (checkpoints saved by
    :meth:`Runner.save_checkpoint`, best checkpoints) is then complete or
    unchanged. Select it with ``backend_args=dict(backend=ATOMIC_BACKEND)``.
    """

    def put(self, obj: bytes, filepath: Union[str, Path]) -> None:
        write_atomic(str(filepath), lambda f: f.write(obj))

    def put_text(self,
                 obj: str,
                 filepath: Union[str, Path],
                 encoding: str = 'utf-8') -> None:
        self.put(obj.encode(encoding), filepath)


def _register_atomic_backend() -> None:
    """Make :data:`ATOMIC_BACKEND` known to mmengine's file backends, once,
    when a hook first needs it (importing mmlocat registers nothing)."""
    from mmengine.fileio.backends.registry_utils import backends
    if backends.get(ATOMIC_BACKEND) is not AtomicLocalBackend:
        register_backend(ATOMIC_BACKEND, AtomicLocalBackend, force=True)


def write_last_checkpoint(work_dir: str, checkpoint: str) -> None:
    """Point ``work_dir/last_checkpoint`` (what ``--resume`` reads) at
    ``checkpoint``, atomically."""
    write_atomic(
        osp.join(work_dir, 'last_checkpoint'),
        lambda f: f.write(str(checkpoint).encode('utf-8')))


def atomic_backend_args(
        out_dir: str,
        backend_args: Optional[dict] = None,
        file_client_args: Optional[dict] = None) -> Optional[dict]:
    """The ``backend_args`` to save into ``out_dir`` with: the given ones,
    or :class:`AtomicLocalBackend` for a local folder when none are
    given."""
    if (backend_args is None and file_client_args is None
            and isinstance(get_file_backend(out_dir), LocalBackend)):
        _register_atomic_backend()
        return dict(backend=ATOMIC_BACKEND)
    return backend_args


def save_pointed(runner, out_dir: str, filename: str, **save_args) -> str:
    """The one checkpoint save of mmlocat's hooks: ``runner.save_checkpoint``
    into ``out_dir/filename``, then ``last_checkpoint`` pointed at it (main
    process, atomically, only once the file is complete). A failed write
    stops training with a :class:`CheckpointWriteError` saying which
    checkpoint ``--resume`` still finds (also logged, so the log file has
    it, not only the traceback on stderr).

    Args:
        save_args: ``runner.save_checkpoint``'s other arguments.

    Returns:
        The checkpoint's path.
    """
    previous = runner.message_hub.get_info('last_ckpt')
    path = osp.join(out_dir, filename)
    runner.message_hub.update_info('last_ckpt', path)
    try:
        runner.save_checkpoint(out_dir, filename, **save_args)
        if is_main_process():
            write_last_checkpoint(runner.work_dir, path)
    except CheckpointWriteError as err:
        kept = (f'last_checkpoint still names {previous}'
                if previous else 'this run has no earlier checkpoint')
        error = CheckpointWriteError(f'{err}; {kept}; training stops')
        error.errno = err.errno
        runner.logger.error(str(error))
        raise error from err
    return path


@HOOKS.register_module()
class AtomicCheckpointHook(CheckpointHook):
    """:class:`~mmengine.hooks.CheckpointHook` with atomic, ordered writes.

    Same arguments and file names as mmengine's hook. When the checkpoint
    folder is local and neither ``backend_args`` nor ``file_client_args``
    is given, files are written by :class:`AtomicLocalBackend`; the
    outdated checkpoint (``max_keep_ckpts``) is deleted only after the new
    one is complete; ``last_checkpoint`` is replaced atomically after it.
    Other storage backends (``backend_args``) keep their own semantics.

    mmlocat's runtime (:mod:`mmlocat.engine.runtime`) uses it in place of
    ``CheckpointHook``; elsewhere set
    ``default_hooks.checkpoint.type = 'mmlocat.AtomicCheckpointHook'``.
    """

    def before_train(self, runner) -> None:
        out_dir = self.out_dir if self.out_dir is not None else \
            runner.work_dir
        self.backend_args = atomic_backend_args(out_dir, self.backend_args,
                                                self.file_client_args)
        super().before_train(runner)

    def _save_checkpoint_with_step(self, runner, step: int,
                                   meta: dict) -> None:
        outdated = self._rotate(runner, step)
        self.last_ckpt = save_pointed(
            runner,
            self.out_dir,
            self.filename_tmpl.format(step),
            file_client_args=self.file_client_args,
            save_optimizer=self.save_optimizer,
            save_param_scheduler=self.save_param_scheduler,
            meta=meta,
            by_epoch=self.by_epoch,
            backend_args=self.backend_args,
            **self.args)
        if outdated is not None:
            self._remove(outdated)

    def _rotate(self, runner, step: int) -> Optional[str]:
        """Record ``step`` among the kept checkpoints (as mmengine does,
        so the saved message hub lists it) and return the path that falls
        out of the window, without deleting it yet."""
        if self.max_keep_ckpts <= 0:
            return None
        if self.keep_ckpt_ids and self.keep_ckpt_ids[-1] == step:
            return None  # _save_checkpoint and save_best in one epoch
        outdated = None
        if len(self.keep_ckpt_ids) == self.max_keep_ckpts:
            old = self.keep_ckpt_ids.popleft()
            outdated = self.file_backend.join_path(
                self.out_dir, self.filename_tmpl.format(old))
        self.keep_ckpt_ids.append(step)
        runner.message_hub.update_info('keep_ckpt_ids',
                                       list(self.keep_ckpt_ids))
        return outdated

    def _remove(self, path: str) -> None:
        if not is_main_process():
            return
        try:
            if self.file_backend.isfile(path):
                self.file_backend.remove(path)
            elif self.file_backend.isdir(path):
                self.file_backend.rmtree(path)  # deepspeed checkpoints
        except OSError as err:  # the new checkpoint is safe; say so
            print_log(
                f'could not delete the outdated checkpoint {path}: {err}',
                logger='current',
                level=logging.WARNING)
