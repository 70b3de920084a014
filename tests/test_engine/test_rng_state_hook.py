"""RNGStateHook pieces: weights-only round trip, restore point, warnings.

The end-to-end SIGKILL / ``--resume`` check is
``tests/test_e2e/test_resume_exact.py``.
"""
import random
from types import SimpleNamespace

import numpy as np
import torch
from mmengine.logging import MMLogger

import mmlocat  # noqa: F401  (safe checkpoint globals)
from mmlocat.engine.hooks import RNGStateHook
from mmlocat.engine.hooks.rng_state_hook import _RestoreBeforeBatch


def _draw() -> tuple:
    return (random.random(), float(np.random.rand()), float(torch.rand(())))


def _runner(resume=True, num_workers=0, seed=0):
    loader = SimpleNamespace(
        sampler=SimpleNamespace(seed=seed),
        num_workers=num_workers,
        batch_size=4)
    return SimpleNamespace(
        train_dataloader=loader,
        seed=seed,
        rank=0,
        world_size=1,
        _resume=resume,
        iter=3,
        train_loop=SimpleNamespace())


def test_state_survives_weights_only_checkpoint(tmp_path):
    hook = RNGStateHook()
    checkpoint = {}
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    hook.before_save_checkpoint(_runner(), checkpoint)
    expected = _draw()
    path = tmp_path / 'ckpt.pth'
    torch.save(checkpoint, path)
    loaded = torch.load(path, weights_only=True)
    assert loaded['rng_state']['data']['worker_seeds'] == []
    _draw()  # something else consumes the generators meanwhile
    hook.after_load_checkpoint(_runner(), loaded)
    hook.before_train_iter(_runner(), 0)
    assert _draw() == expected


def test_restore_waits_for_the_replayed_batches():
    calls = []
    wrapped = _RestoreBeforeBatch(
        iter(range(10)), 3, lambda: calls.append('restore'))
    got = []
    for _ in range(5):
        got.append(next(wrapped))
        calls.append(got[-1])
    assert calls == [0, 1, 2, 'restore', 3, 4]


def test_validation_leaves_training_stream_untouched():
    hook = RNGStateHook()
    torch.manual_seed(3)
    expected = float(torch.rand(()))
    torch.manual_seed(3)
    hook.before_val(None)
    torch.rand(5)  # e.g. a val dataloader drawing its base seed
    hook.after_val(None)
    assert float(torch.rand(())) == expected


def test_changed_data_stream_and_missing_state_are_reported(capsys):
    MMLogger.get_instance('mmlocat_rng_test')
    hook = RNGStateHook()
    checkpoint = {}
    hook.before_save_checkpoint(_runner(num_workers=2), checkpoint)
    hook.after_load_checkpoint(_runner(num_workers=0), checkpoint)
    hook.after_load_checkpoint(_runner(), {})
    out = capsys.readouterr()
    text = out.out + out.err
    assert "'num_workers': (2, 0)" in text
    assert 'no random-generator state' in text
