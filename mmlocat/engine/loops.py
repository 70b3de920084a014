"""An epoch-based training loop that can resume inside an epoch.

mmengine's :class:`~mmengine.runner.EpochBasedTrainLoop` always starts an
epoch at its first batch: resumed from a checkpoint saved in the middle of
an epoch (:class:`mmlocat.engine.PreemptionHook` saves one when the job is
told to stop) it would train that epoch's first batches twice and run past
``max_iters``. :class:`ResumableEpochBasedTrainLoop` skips them instead, as
mmengine's :class:`~mmengine.runner.IterBasedTrainLoop` does on resume: it
draws the already-trained batches from the dataloader and drops them, so
the sampler order and the workers' random streams continue exactly.
"""
import logging

from mmengine.logging import print_log
from mmengine.runner import EpochBasedTrainLoop

from mmlocat.registry import LOOPS

__all__ = ['ResumableEpochBasedTrainLoop']


class _LazyIterator:
    """``iter(dataloader)`` at the first ``next``: the epoch's hooks
    (sampler epoch, random-state restore) act before workers start."""

    def __init__(self, dataloader) -> None:
        self._dataloader = dataloader
        self._iterator = None

    def __iter__(self) -> '_LazyIterator':
        return self

    def __next__(self):
        if self._iterator is None:
            self._iterator = iter(self._dataloader)
        return next(self._iterator)


@LOOPS.register_module()
class ResumableEpochBasedTrainLoop(EpochBasedTrainLoop):
    """:class:`~mmengine.runner.EpochBasedTrainLoop` that resumes mid-epoch.

    Same arguments and behaviour; only a resume from a checkpoint whose
    iteration lies inside an epoch (``iter > epoch * len(dataloader)``)
    differs: that epoch continues with the batch after the saved one.
    During an epoch the batches come from :attr:`dataloader_iterator`, so
    hooks may wrap it in ``before_train_epoch`` (as
    :class:`mmlocat.engine.RNGStateHook` does to restore the random state
    right before the first new batch). mmlocat's runtime uses this
    loop in place of ``EpochBasedTrainLoop``; elsewhere set
    ``train_cfg = dict(type='mmlocat.ResumableEpochBasedTrainLoop',
    max_epochs=..., val_interval=...)``.
    """

    @property
    def batches_to_skip(self) -> int:
        """Batches of the current epoch trained before the resume (0 at
        an epoch start)."""
        return max(0, self._iter - self._epoch * len(self.dataloader))

    def run_epoch(self) -> None:
        """Iterate one epoch, from the resumed batch on."""
        skip = self.batches_to_skip
        if skip > len(self.dataloader):
            raise RuntimeError(
                f'cannot resume at iteration {self._iter} in epoch '
                f'{self._epoch + 1}: an epoch has {len(self.dataloader)} '
                'batches now, so the dataset or the batch size changed since '
                'the checkpoint was saved')
        self.dataloader_iterator = _LazyIterator(self.dataloader)
        self.runner.call_hook('before_train_epoch')
        self.runner.model.train()
        if skip:
            print_log(
                f'Advance the dataloader {skip} of {len(self.dataloader)} '
                f'batches into epoch {self._epoch + 1} to skip data that '
                'has already been trained',
                logger='current',
                level=logging.WARNING)
            for _ in range(skip):
                next(self.dataloader_iterator)
        for idx, data_batch in enumerate(self.dataloader_iterator, skip):
            self.run_iter(idx, data_batch)

        self.runner.call_hook('after_train_epoch')
        self._epoch += 1
