"""Count and name the training samples ``CheckedDataset`` skipped.

With ``mmlocat.CheckedDataset(on_error='skip')`` a data worker that meets a
bad file logs it and loads another sample. The workers are separate
processes; this hook reads their shared record in the main process and
logs how many samples were skipped and which files, at the end of every
epoch (iteration-based loops run one long "epoch": there, every
``interval`` iterations), and the total at the end of training.
"""
import logging
from collections import Counter
from typing import List

from mmengine.dist import all_gather_object
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.runner import IterBasedTrainLoop

from mmlocat.datasets.checked_dataset import find_checked
from mmlocat.registry import HOOKS

__all__ = ['SkippedFilesHook']


@HOOKS.register_module()
class SkippedFilesHook(Hook):
    """Log the samples skipped by the training data's ``CheckedDataset``.

    Args:
        interval: Iterations between reports of an iteration-based loop
            (mmengine's ``LoggerHook`` default).
        max_names: Files named in a report (all are logged by the workers
            when skipped).
    """
    priority = 'LOW'

    def __init__(self, interval: int = 50, max_names: int = 5) -> None:
        if interval < 1 or max_names < 0:
            raise ValueError(f'interval must be >= 1 and max_names >= 0, '
                             f'got {interval} and {max_names}')
        self.interval = interval
        self.max_names = max_names
        self._reported = 0

    def _skipped(self, runner) -> List[dict]:
        mine = [
            entry for checked in find_checked(runner.train_dataloader.dataset)
            for entry in checked.skipped()
        ]
        return [entry for rank in all_gather_object(mine) for entry in rank]

    def _report(self, runner, span: str) -> None:
        skipped = self._skipped(runner)
        new = skipped[self._reported:]
        self._reported = len(skipped)
        if not new:
            return
        files = Counter(f'{e["kind"]}: {e["path"]}' for e in new)
        names = '; '.join(f'{name} (x{n})' if n > 1 else name
                          for name, n in list(files.items())[:self.max_names])
        more = (f' and {len(files) - self.max_names} more file(s)'
                if len(files) > self.max_names else '')
        print_log(
            f'skipped {len(new)} training sample(s) with bad files in '
            f'{span} ({len(skipped)} in total): {names}{more}',
            logger='current',
            level=logging.WARNING)

    def before_train(self, runner) -> None:
        if not find_checked(runner.train_dataloader.dataset):
            print_log(
                'SkippedFilesHook: the training dataset is not wrapped in '
                "mmlocat.CheckedDataset(on_error='skip'): nothing to count",
                logger='current',
                level=logging.WARNING)

    def after_train_iter(self,
                         runner,
                         batch_idx: int,
                         data_batch=None,
                         outputs=None) -> None:
        if isinstance(runner.train_loop, IterBasedTrainLoop) and \
                self.every_n_train_iters(runner, self.interval):
            self._report(runner, f'iterations up to {runner.iter + 1}')

    def after_train_epoch(self, runner) -> None:
        if isinstance(runner.train_loop, IterBasedTrainLoop):
            self._report(runner, f'iterations up to {runner.iter}')
        else:
            self._report(runner, f'epoch {runner.epoch + 1}')

    def after_train(self, runner) -> None:
        total = len(self._skipped(runner))
        print_log(
            f'{total} training sample(s) skipped for bad files in this run'
            if total else 'no training sample skipped for bad files',
            logger='current',
            level=logging.WARNING if total else logging.INFO)
