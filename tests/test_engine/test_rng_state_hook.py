"""RNGStateHook pieces: weights-only round trip, restore point, warnings.

The end-to-end SIGKILL / ``--resume`` check is
``tests/test_e2e/test_resume_exact.py``.
"""
import random
from types import SimpleNamespace

import numpy as np
import torch
from mmengine.config import Config
from mmengine.logging import MMLogger

import mmlocat  # noqa: F401  (registry node)
from mmlocat.engine.hooks import RNGStateHook
from mmlocat.engine.hooks.rng_state_hook import _RestoreBeforeBatch


def _draw() -> tuple:
    return (random.random(), float(np.random.rand()), float(torch.rand(())))


def _runner(resume=True, num_workers=0, seed=0, world_size=1, cfg=None):
    loader = SimpleNamespace(
        sampler=SimpleNamespace(seed=seed),
        num_workers=num_workers,
        batch_size=4)
    return SimpleNamespace(
        train_dataloader=loader,
        seed=seed,
        rank=0,
        world_size=world_size,
        cfg=Config(cfg or {}),
        _resume=resume,
        iter=3,
        train_loop=SimpleNamespace())


def _logged(capsys, name: str):
    """Text logged since the last call, via a logger of this test only.

    Created in the test body, so that its stream handler writes to this
    test's captured stdout (not to an earlier test's closed one).
    """
    MMLogger.get_instance(f'mmlocat_rng_test_{name}')

    def text() -> str:
        out = capsys.readouterr()
        text = out.out + out.err
        assert 'Logging error' not in text
        return text

    return text


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
    log = _logged(capsys, 'changed_data_stream_and_missin')
    hook = RNGStateHook()
    checkpoint = {}
    hook.before_save_checkpoint(_runner(num_workers=2), checkpoint)
    hook.after_load_checkpoint(_runner(num_workers=0), checkpoint)
    hook.after_load_checkpoint(_runner(), {})
    text = log()
    assert "'num_workers': (2, 0)" in text
    assert 'no random-generator state' in text


def test_plain_load_from_neither_warns_nor_restores(capsys):
    log = _logged(capsys, 'plain_load_from_neither_warns_')
    hook = RNGStateHook()
    checkpoint = {}
    hook.before_save_checkpoint(_runner(num_workers=2), checkpoint)
    # load_from (fine-tuning): no rng_state, or another data stream, is fine
    hook.after_load_checkpoint(_runner(resume=False), {})
    hook.after_load_checkpoint(
        _runner(resume=False, num_workers=0), checkpoint)
    assert 'RNGStateHook' not in log()
    assert hook._pending is None


class _FakeCuda:
    """``torch.cuda`` as a process that sees ``count`` devices."""

    def __init__(self, monkeypatch, count: int, current: int = 0) -> None:
        self.set_all, self.set_one = [], []
        for name, value in dict(
                is_available=lambda: True,
                device_count=lambda: count,
                current_device=lambda: current,
                set_rng_state_all=self.set_all.append,
                set_rng_state=lambda s, d: self.set_one.append((s, d)),
        ).items():
            monkeypatch.setattr(torch.cuda, name, value)


def _saved_state_with_cuda(cuda: list, device: int = 0) -> dict:
    hook = RNGStateHook()
    checkpoint = {}
    hook.before_save_checkpoint(_runner(), checkpoint)
    checkpoint['rng_state']['state'].update(cuda=cuda, cuda_device=device)
    return checkpoint


def test_other_cuda_device_count_warns_and_restores_the_rest(
        capsys, monkeypatch):
    log = _logged(capsys, 'other_cuda_device_count_warns_')
    random.seed(5), np.random.seed(5), torch.manual_seed(5)
    states = [torch.full((8, ), i, dtype=torch.uint8) for i in range(4)]
    checkpoint = _saved_state_with_cuda(states)
    expected = _draw()
    fake = _FakeCuda(monkeypatch, count=2)
    hook = RNGStateHook()
    hook.after_load_checkpoint(_runner(), checkpoint)
    hook.before_train_iter(_runner(), 0)  # no RuntimeError
    assert _draw() == expected  # python, numpy, torch CPU restored
    assert fake.set_all == []
    assert len(fake.set_one) == 1 and fake.set_one[0][1] == 0
    assert torch.equal(fake.set_one[0][0], states[0])
    text = log()
    assert 'CUDA generator state of 4 device(s), this process sees 2' in text
    assert 'will not be bit-identical' in text


def test_saved_device_state_goes_to_the_current_device(capsys, monkeypatch):
    log = _logged(capsys, 'saved_device_state_goes_to_the')
    # DDP rank 1 resuming rank 0's checkpoint: device 1 continues from
    # rank 0's device-0 stream; same device count, so no warning
    states = [torch.full((8, ), i, dtype=torch.uint8) for i in range(2)]
    checkpoint = _saved_state_with_cuda(states, device=0)
    fake = _FakeCuda(monkeypatch, count=2, current=1)
    hook = RNGStateHook()
    hook.after_load_checkpoint(_runner(), checkpoint)
    hook.before_train_iter(_runner(), 0)
    assert fake.set_all == [states]
    assert len(fake.set_one) == 1 and fake.set_one[0][1] == 1
    assert torch.equal(fake.set_one[0][0], states[0])
    assert 'RNGStateHook' not in log()


def test_ddp_resume_with_diff_rank_seed_warns(capsys):
    log = _logged(capsys, 'ddp_resume_with_diff_rank_seed')

    def saved(world_size: int) -> dict:
        checkpoint = {}
        RNGStateHook().before_save_checkpoint(
            _runner(world_size=world_size), checkpoint)
        return checkpoint

    for world_size, diff in ((1, True), (2, False), (2, None)):
        randomness = dict(seed=0)
        if diff is not None:
            randomness['diff_rank_seed'] = diff
        hook = RNGStateHook()
        hook.after_load_checkpoint(
            _runner(world_size=world_size, cfg=dict(randomness=randomness)),
            saved(world_size))
        assert 'RNGStateHook' not in log()
        assert hook._pending is not None
    runner = _runner(
        world_size=2, cfg=dict(randomness=dict(seed=0, diff_rank_seed=True)))
    hook = RNGStateHook()
    hook.after_load_checkpoint(runner, saved(2))
    text = log()
    assert text.count('RNGStateHook') == 1
    assert 'diff_rank_seed=True' in text
    assert "every rank continues rank 0's streams" in text
    assert hook._pending is not None  # restored all the same
