"""One training run per work dir at a time.

Two runs writing one work dir overwrite each other's ``iter_N.pth`` and
``last_checkpoint``; a later ``--resume`` then mixes them silently.
:class:`WorkDirLock` makes the second run refuse to start, naming the run
that holds the work dir. The lock is a file created atomically
(``O_CREAT | O_EXCL``, which also holds on NFS) holding the owner's host,
pid, process start time and slurm job; it is removed when the run ends
(also on an error or a handled signal). A lock left by a run that was
killed (SIGKILL, a node crash) is recognised as stale and taken over when

* its host is this host and its process is gone (or the pid now belongs to
  a process started at another time), or
* it belongs to an earlier start of this same slurm job (``SLURM_JOB_ID``
  equal, ``SLURM_RESTART_COUNT`` lower): a requeued job.

A lock of a run on another host cannot be checked from here; the error says
which file to delete once that run is known to be gone.
"""
import json
import os
import os.path as osp
import socket
import time
from typing import Optional, Tuple

__all__ = ['WorkDirLock', 'WorkDirBusyError', 'LOCK_NAME', 'pid_alive']

#: The lock file's name inside the work dir.
LOCK_NAME = 'train.lock'


class WorkDirBusyError(RuntimeError):
    """Another live run holds the work dir."""


def _start_time(pid: int) -> Optional[str]:
    """The process's start time in clock ticks since boot (Linux), which
    tells a reused pid from the original process; ``None`` elsewhere."""
    try:
        with open(f'/proc/{pid}/stat') as f:
            stat = f.read()
    except OSError:
        return None
    # the command name (field 2) may hold spaces; it ends at the last ')'
    return stat[stat.rindex(')') + 2:].split()[19]


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host (any owner)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def _restart_count() -> int:
    try:
        return int(os.environ.get('SLURM_RESTART_COUNT', '0'))
    except ValueError:
        return 0


class WorkDirLock:
    """``work_dir/train.lock`` for the lifetime of a training run.

    Use as a context manager (or :meth:`acquire` / :meth:`release`). Only
    one process of a distributed run takes it (``tools/train.py``: rank 0).

    Args:
        work_dir: The run's work dir (created if missing).
        command: What the run is (recorded for the message of a refused
            run), e.g. the command line.
    """

    def __init__(self, work_dir: str, command: str = '') -> None:
        self.work_dir = work_dir
        self.path = osp.join(work_dir, LOCK_NAME)
        self.command = command
        self.stale: Optional[dict] = None  # a taken-over lock, if any
        self._content: Optional[str] = None

    def _record(self) -> dict:
        pid = os.getpid()
        return dict(
            host=socket.gethostname(),
            pid=pid,
            start_time=_start_time(pid),
            started=time.strftime('%Y-%m-%d %H:%M:%S'),
            slurm_job_id=os.environ.get('SLURM_JOB_ID'),
            slurm_restart_count=_restart_count(),
            command=self.command)

    def acquire(self) -> 'WorkDirLock':
        """Take the lock.

        Raises:
            WorkDirBusyError: If a live run (or a run on another host that
                cannot be checked) holds it.
            OSError: If the work dir cannot be created or written.
        """
        os.makedirs(self.work_dir, exist_ok=True)
        content = json.dumps(self._record(), indent=1) + '\n'
        for _ in range(3):  # a stale lock is moved away, then try again
            if self._create(content):
                self._content = content
                return self
            holder, text = self._read()
            reason = self._stale_reason(holder)
            if reason is None:
                raise WorkDirBusyError(self._busy_message(holder))
            if self._take_over(text):
                self.stale = dict(holder or {}, reason=reason)
        raise WorkDirBusyError(
            f'{self.path} keeps reappearing: another run is starting in '
            f'{self.work_dir} at the same time')

    def release(self) -> None:
        """Remove the lock if it is still this run's."""
        if self._content is None:
            return
        try:
            with open(self.path) as f:
                mine = f.read() == self._content
            if mine:
                os.remove(self.path)
        except OSError:
            pass
        self._content = None

    def __enter__(self) -> 'WorkDirLock':
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

    # -- helpers --------------------------------------------------------

    def _create(self, content: str) -> bool:
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                         0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, 'w') as f:
            f.write(content)
        return True

    def _read(self) -> Tuple[Optional[dict], str]:
        try:
            with open(self.path) as f:
                text = f.read()
        except FileNotFoundError:
            return {}, ''  # released meanwhile: nothing to take over
        try:
            holder = json.loads(text)
        except ValueError:
            holder = None
        return (holder if isinstance(holder, dict) else None), text

    def _stale_reason(self, holder: Optional[dict]) -> Optional[str]:
        """Why the lock is stale, or ``None`` if its run may be alive."""
        if holder == {}:
            return 'released'
        if holder is None:
            return None  # unreadable: never guess
        job = os.environ.get('SLURM_JOB_ID')
        if job and holder.get('slurm_job_id') == job and int(
                holder.get('slurm_restart_count') or 0) < _restart_count():
            return f'an earlier start of slurm job {job} (requeued)'
        if holder.get('host') != socket.gethostname():
            return None
        pid = int(holder.get('pid', -1))
        if pid <= 0 or not pid_alive(pid):
            return f'its process {pid} is gone'
        recorded, now = holder.get('start_time'), _start_time(pid)
        if recorded and now and recorded != now:
            return f'pid {pid} now belongs to another process'
        return None

    def _take_over(self, seen: str) -> bool:
        """Move a stale lock out of the way; ``False`` if it changed
        meanwhile (another run got there first)."""
        aside = f'{self.path}.stale.{os.getpid()}'
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return False
        with open(aside) as f:
            moved = f.read()
        if moved != seen:  # a fresh lock of another starter: put it back
            try:
                os.link(aside, self.path)
            except OSError:
                pass
            os.remove(aside)
            return False
        os.remove(aside)
        return True

    def _busy_message(self, holder: Optional[dict]) -> str:
        if holder is None:
            return (f'work dir {self.work_dir} is locked by {self.path}, '
                    'which cannot be read; if no run uses this work dir, '
                    'delete that file')
        who = (f'pid {holder.get("pid")} on host {holder.get("host")} '
               f'since {holder.get("started")}')
        if holder.get('slurm_job_id'):
            who += f' (slurm job {holder["slurm_job_id"]})'
        text = (f'work dir {self.work_dir} is in use by another training '
                f'run: {who}')
        if holder.get('command'):
            text += f': {holder["command"]}'
        text += ('. Two runs in one work dir overwrite each other\'s '
                 'checkpoints; use another --work-dir, or wait for that run '
                 'to end and then --resume it')
        if holder.get('host') != socket.gethostname():
            text += (f'. If that run is known to be gone, delete '
                     f'{self.path}')
        return text
