"""mmlocat.VocabularyRecordHook: the model's vocabulary files in every
checkpoint's meta."""
import json
from types import SimpleNamespace

import numpy as np
import torch
from helpers.fvit import EMBED, build_detector, tiny_fvit_cfg, write_embeddings

from mmlocat.datasets.vocabulary_record import (VOCABULARY_KEY,
                                                vocabulary_record)
from mmlocat.engine.hooks import VocabularyRecordHook
from mmlocat.text import save_text_embeddings

NAMES = ['cat', 'dog', 'remote control']


def test_hook_writes_the_record_into_checkpoints(tmp_path):
    emb = write_embeddings(tmp_path / 'emb.npy', NAMES, seed=0)
    base = tmp_path / 'emb.base.json'
    base.write_text(json.dumps(NAMES[:2]))
    model = build_detector(
        tiny_fvit_cfg(emb, NAMES, base_class_names=str(base)))
    expected = vocabulary_record(model)
    assert sorted(expected) == [
        'roi_head.bbox_head.base_class_names',
        'roi_head.bbox_head.text_embeddings'
    ]
    hook = VocabularyRecordHook()
    runner = SimpleNamespace(model=model)
    hook.before_train(runner)
    # a file changed after the model read it: the record is of the start
    save_text_embeddings(emb, np.ones((4, EMBED), np.float32),
                         NAMES + ['background'])
    checkpoint = dict(meta=dict(epoch=1))
    hook.before_save_checkpoint(runner, checkpoint)
    assert checkpoint['meta'] == dict(epoch=1, **{VOCABULARY_KEY: expected})
    # a model that reads no such file gets no record
    plain = SimpleNamespace(model=torch.nn.Linear(2, 2))
    checkpoint = dict(meta={})
    VocabularyRecordHook().before_save_checkpoint(plain, checkpoint)
    assert checkpoint == dict(meta={})
