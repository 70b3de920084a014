"""The one hook that writes the records into checkpoints and re-checks
them on resume (:mod:`mmlocat.utils.records`)."""
import copy
from typing import Dict, Optional

from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper

from mmlocat.datasets.class_file_record import (class_file_record,
                                                model_class_files)
from mmlocat.registry import HOOKS
from mmlocat.utils.records import (CLASS_FILES_KEY, CLIP_RUN_KEY,
                                   RECORDS_VERSION, RESUME_FIX, VERSION_KEY,
                                   check_class_files, check_meta)

__all__ = ['RecordHook', 'VocabularyRecordHook', 'CLIPProvenanceHook']


def _clip_records(model) -> Optional[Dict]:
    """A LaSt-CLIP model's two towers' records (``clip_provenance``)."""
    if is_model_wrapper(model):
        model = model.module
    records = getattr(model, 'clip_provenance', None)
    return copy.deepcopy(records) if records is not None else None


@HOOKS.register_module()
class RecordHook(Hook):
    """Write every record of a run into ``checkpoint['meta']``, and refuse
    to resume a run whose model no longer matches them.

    Written (:data:`~mmlocat.utils.records.META_SCHEMA`): ``class_files``,
    the text-embedding and class-name files the model read (their sha256
    and row names, :func:`~mmlocat.datasets.class_file_record.
    class_file_record`, compared by ``tools/test.py`` / ``tools/infer.py``
    with the files they are given); ``clip_provenance``, a
    :class:`mmlocat.CLIPContrastive` model's two towers' CLIP records (what
    ``tools/model_converters/lastclip2mmlocat.py`` exports);
    ``records_version``.

    Before evaluating (``before_val`` / ``before_test``, the weights
    loaded), every metric with a ``check_evaluated_model`` method
    (:class:`mmlocat.ZeroShotAccuracy`: its embeddings against the
    evaluated model's text tower) is given the model.

    On resume (``--resume``; ``after_load_checkpoint`` runs before the
    first iteration, so before ``max_keep_ckpts`` can delete the
    checkpoint that recorded the old files) every record the checkpoint
    holds is compared with the model built now: other embedding or
    class-name files, or another CLIP, are refused naming both. Loading a
    checkpoint to fine-tune (``load_from`` without resume) checks nothing.

    mmlocat's runtime (``runner_type = 'mmlocat.MMLocatRunner'``) adds it
    to every run. The files are read when training starts, right after
    the model read them (at build); a model without such files gets no
    ``class_files`` record.
    """
    priority = 'VERY_HIGH'  # before the checkpoint hook saves

    def __init__(self) -> None:
        self._record = None

    def before_train(self, runner) -> None:
        self._record = class_file_record(runner.model)

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        if not getattr(runner, '_resume', False):
            return
        where = 'the resumed checkpoint'
        meta = check_meta(checkpoint.get('meta'), where)
        where = f'{where} (epoch {meta.get("epoch")})'
        check_class_files(
            model_class_files(runner.model),
            where,
            meta=meta,
            logger='current',
            fix=RESUME_FIX)
        recorded, now = meta.get(CLIP_RUN_KEY), _clip_records(runner.model)
        if recorded is not None and now is not None and recorded != now:
            raise ValueError(
                f'{where} was trained with the CLIP towers {recorded} but '
                f'the model is built with {now}: resume with the config '
                'the run started with, or start a new run (--overwrite)')

    @staticmethod
    def _check_metrics(runner, loop) -> None:
        model = runner.model.module if is_model_wrapper(
            runner.model) else runner.model
        evaluator = getattr(loop, 'evaluator', None)  # a custom loop: none
        for metric in getattr(evaluator, 'metrics', ()):
            check = getattr(metric, 'check_evaluated_model', None)
            if check is not None:
                check(model)

    def before_val(self, runner) -> None:
        self._check_metrics(runner, runner.val_loop)

    def before_test(self, runner) -> None:
        self._check_metrics(runner, runner.test_loop)

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        if self._record is None:  # saved before training started
            self._record = class_file_record(runner.model)
        meta = checkpoint.setdefault('meta', {})
        if self._record:
            meta[CLASS_FILES_KEY] = dict(self._record)
        clip = _clip_records(runner.model)
        if clip is not None:
            meta[CLIP_RUN_KEY] = clip
        meta[VERSION_KEY] = RECORDS_VERSION


@HOOKS.register_module()
class VocabularyRecordHook(RecordHook):
    """:class:`RecordHook` under its former name, kept so that the saved
    configs of earlier runs (``custom_hooks`` naming it) still build."""


@HOOKS.register_module()
class CLIPProvenanceHook(RecordHook):
    """:class:`RecordHook` under a former name (the LaSt-CLIP recipes'
    ``custom_hooks`` named it), kept so that the saved configs of earlier
    runs still build."""
