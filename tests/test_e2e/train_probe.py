"""A test-only hook, imported by derived configs through ``custom_imports``.

Records what the reliability tests compare, from inside a training run:

* every iteration's loss, exactly (``float.hex``), to ``$PROBE_LOSSES``
  (one line ``rank iter hex``);
* the main process's resident memory at the iterations listed in
  ``$PROBE_RSS_AT`` (comma separated), to ``$PROBE_RSS`` (``iter kB``);
* with ``$PROBE_PAUSE_AT`` set, after that iteration it writes its pid to
  ``$PROBE_LOSSES.pid.RANK``, then ``$PROBE_LOSSES.paused``, and waits (up
  to 300 s) until a test creates ``$PROBE_LOSSES.go``, so the test can
  signal a process at a known point;
* with ``$PROBE_SIGNAL_AT_START`` set (a signal name), it sends that signal
  to its own process in ``before_train``;
* with ``$PROBE_FSIZE_AT`` set, after that iteration it limits the size of
  any file the process writes to ``$PROBE_FSIZE`` bytes (``RLIMIT_FSIZE``:
  a larger write fails with EFBIG, as on a full disk).
"""
import os
import resource
import signal
import time

from mmengine.hooks import Hook
from mmengine.registry import HOOKS


def _rss_kb() -> int:
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1])
    raise RuntimeError('no VmRSS in /proc/self/status')


@HOOKS.register_module(force=True)
class TrainProbeHook(Hook):
    priority = 'LOWEST'  # after the checkpoint hook of the same iteration

    def __init__(self) -> None:
        self.losses = os.environ.get('PROBE_LOSSES')
        self.rss = os.environ.get('PROBE_RSS')
        self.rss_at = {
            int(i)
            for i in os.environ.get('PROBE_RSS_AT', '').split(',') if i
        }
        pause = os.environ.get('PROBE_PAUSE_AT')
        self.pause_at = int(pause) if pause else None
        fsize_at = os.environ.get('PROBE_FSIZE_AT')
        self.fsize_at = int(fsize_at) if fsize_at else None

    def before_train(self, runner) -> None:
        name = os.environ.get('PROBE_SIGNAL_AT_START')
        if name:
            os.kill(os.getpid(), getattr(signal, name))

    def after_train_iter(self,
                         runner,
                         batch_idx,
                         data_batch=None,
                         outputs=None) -> None:
        step = runner.iter + 1
        if self.losses:
            with open(self.losses, 'a') as f:
                f.write(f'{runner.rank} {step} '
                        f'{float(outputs["loss"]).hex()}\n')
        if self.rss and step in self.rss_at:
            with open(self.rss, 'a') as f:
                f.write(f'{step} {_rss_kb()}\n')
        if self.fsize_at == step:
            limit = int(os.environ['PROBE_FSIZE'])
            hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
        if self.pause_at == step:
            with open(f'{self.losses}.pid.{runner.rank}', 'w') as f:
                f.write(str(os.getpid()))
            with open(f'{self.losses}.paused', 'w') as f:
                f.write(str(step))
            deadline = time.time() + 300
            while (not os.path.exists(f'{self.losses}.go')
                   and time.time() < deadline):
                time.sleep(0.05)
