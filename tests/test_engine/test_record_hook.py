"""mmlocat.RecordHook: every record in every checkpoint's meta (the model's
class files, a LaSt-CLIP run's towers), re-checked on resume."""
import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from helpers.fvit import EMBED, build_detector, tiny_fvit_cfg, write_embeddings

from mmlocat.datasets.class_file_record import class_file_record
from mmlocat.engine.hooks import RecordHook, VocabularyRecordHook
from mmlocat.text import save_text_embeddings
from mmlocat.utils.checkpoint_io import read_checkpoint
from mmlocat.utils.records import RECORDS_VERSION, VERSION_KEY

NAMES = ['cat', 'dog', 'remote control']


def test_hook_writes_the_record_into_checkpoints(tmp_path):
    emb = write_embeddings(tmp_path / 'emb.npy', NAMES, seed=0)
    base = tmp_path / 'emb.base.json'
    base.write_text(json.dumps(NAMES[:2]))
    model = build_detector(
        tiny_fvit_cfg(emb, NAMES, base_class_names=str(base)))
    expected = class_file_record(model)
    assert sorted(expected) == [
        'roi_head.bbox_head.base_class_names',
        'roi_head.bbox_head.text_embeddings'
    ]
    hook = RecordHook()
    runner = SimpleNamespace(model=model)
    hook.before_train(runner)
    # a file changed after the model read it: the record is of the start
    save_text_embeddings(emb, np.ones((4, EMBED), np.float32),
                         NAMES + ['background'])
    checkpoint = dict(meta=dict(epoch=1))
    hook.before_save_checkpoint(runner, checkpoint)
    assert checkpoint['meta'] == {
        'epoch': 1,
        'class_files': expected,  # 'vocabulary' before issue 34
        VERSION_KEY: RECORDS_VERSION
    }
    # a model that reads no such file gets no class-file record; the
    # former name is the same hook (saved configs of earlier runs)
    plain = SimpleNamespace(model=torch.nn.Linear(2, 2))
    checkpoint = dict(meta={})
    VocabularyRecordHook().before_save_checkpoint(plain, checkpoint)
    assert checkpoint == dict(meta={VERSION_KEY: RECORDS_VERSION})


def _saved(tmp_path, model) -> dict:
    """A checkpoint file the hook wrote records into, read back by the
    one safe reader (what ``Runner.resume`` hands to the hooks)."""
    hook = RecordHook()
    runner = SimpleNamespace(model=model)
    hook.before_train(runner)
    checkpoint = dict(meta=dict(epoch=1), state_dict=model.state_dict())
    hook.before_save_checkpoint(runner, checkpoint)
    path = str(tmp_path / 'epoch_1.pth')
    torch.save(checkpoint, path)
    return read_checkpoint(path)


def test_resume_with_another_embedding_file_is_refused(tmp_path):
    """F-ViT: ``--resume`` with another embedding file was trained on (and
    ``max_keep_ckpts`` then deleted the checkpoint that recorded the old
    one); the hook refuses it when the checkpoint is loaded, before the
    first iteration."""
    emb = write_embeddings(tmp_path / 'emb.npy', NAMES, seed=0)
    checkpoint = _saved(tmp_path, build_detector(tiny_fvit_cfg(emb, NAMES)))
    other = write_embeddings(tmp_path / 'other.npy', NAMES, seed=1)
    model = build_detector(tiny_fvit_cfg(other, NAMES))
    resuming = SimpleNamespace(model=model, _resume=True)
    with pytest.raises(
            ValueError,
            match='other.npy.*same names in the same '
            'order with other values') as info:
        RecordHook().after_load_checkpoint(resuming, checkpoint)
    # issue 34: the fix named is training's, not test.py's flag
    assert str(info.value).endswith(
        'Resume with the config and files the run started with, or start '
        'a new run with the new files (tools/train.py --overwrite, or '
        'another --work-dir; --cfg-options load_from=CHECKPOINT starts it '
        'from these weights)')
    assert '--allow' not in str(info.value)
    # a checkpoint written before the rename (meta['vocabulary']) is read
    # under the key now ('class_files') and re-checked alike
    old = dict(checkpoint, meta=dict(checkpoint['meta']))
    old['meta']['vocabulary'] = old['meta'].pop('class_files')
    with pytest.raises(ValueError, match='other.npy.*same names'):
        RecordHook().after_load_checkpoint(resuming, old)
    # the same files resume; loading weights to fine-tune checks nothing
    RecordHook().after_load_checkpoint(
        SimpleNamespace(
            model=build_detector(tiny_fvit_cfg(emb, NAMES)), _resume=True),
        checkpoint)
    RecordHook().after_load_checkpoint(
        SimpleNamespace(model=model, _resume=False), checkpoint)


def test_resume_with_other_clip_towers_is_refused(tmp_path):
    model = torch.nn.Linear(2, 2)
    model.clip_provenance = dict(text=dict(sha256='1' * 64), image={})
    checkpoint = _saved(tmp_path, model)
    assert checkpoint['meta']['clip_provenance'] == model.clip_provenance
    RecordHook().after_load_checkpoint(
        SimpleNamespace(model=model, _resume=True), checkpoint)
    model.clip_provenance = dict(text=dict(sha256='2' * 64), image={})
    with pytest.raises(ValueError, match='trained with the CLIP towers'):
        RecordHook().after_load_checkpoint(
            SimpleNamespace(model=model, _resume=True), checkpoint)
