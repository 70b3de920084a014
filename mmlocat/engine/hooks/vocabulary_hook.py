"""Write the model's vocabulary files into every checkpoint
(:mod:`mmlocat.datasets.vocabulary_record`)."""
from mmengine.hooks import Hook

from mmlocat.datasets.vocabulary_record import (VOCABULARY_KEY,
                                                vocabulary_record)
from mmlocat.registry import HOOKS

__all__ = ['VocabularyRecordHook']


@HOOKS.register_module()
class VocabularyRecordHook(Hook):
    """Record the text-embedding and class-name files the model read (their
    sha256 and row names, :func:`~mmlocat.datasets.vocabulary_record.
    vocabulary_record`) in ``checkpoint['meta']['vocabulary']``, which
    ``tools/test.py`` and ``tools/infer.py`` compare with the files they
    are given.

    mmlocat's runtime (``runner_type = 'mmlocat.MMLocatRunner'``) adds it
    to every run; a config's ``custom_hooks`` may name it too
    (``dict(type='mmlocat.VocabularyRecordHook')``). The files are read
    when training starts, right after the model read them (at build); a
    model without such files gets no record.
    """
    priority = 'VERY_HIGH'  # before the checkpoint hook saves

    def __init__(self) -> None:
        self._record = None

    def before_train(self, runner) -> None:
        self._record = vocabulary_record(runner.model)

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        if self._record is None:  # saved before training started
            self._record = vocabulary_record(runner.model)
        if self._record:
            checkpoint.setdefault('meta',
                                  {})[VOCABULARY_KEY] = dict(self._record)
