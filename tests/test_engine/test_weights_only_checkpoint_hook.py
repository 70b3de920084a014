"""WeightsOnlyCheckpointHook: mmengine checkpoints that weights-only
loading reads, without changing mmengine."""
import argparse
import io
import pickle

import numpy as np
import pytest
import torch
from mmengine.logging import HistoryBuffer, MessageHub
from mmengine.optim.scheduler import OneCycleLR

from mmlocat.engine.hooks import WeightsOnlyCheckpointHook
from mmlocat.utils import mmengine_checkpoint_globals


def _scheduler(strategy: str) -> OneCycleLR:
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=0.1)
    return OneCycleLR(
        optimizer, eta_max=0.1, total_steps=20, anneal_strategy=strategy)


def _save(checkpoint: dict) -> io.BytesIO:
    buffer = io.BytesIO()
    torch.save(checkpoint, buffer)
    buffer.seek(0)
    return buffer


def _weights_only_round_trip(checkpoint: dict) -> dict:
    with mmengine_checkpoint_globals():
        return torch.load(_save(checkpoint), weights_only=True)


def _hub_state(name: str) -> dict:
    hub = MessageHub.get_instance(name)
    for i in range(3):
        hub.update_scalar('train/loss', float(i))
    hub.update_scalar('train/lr', np.float32(0.5))
    hub.update_info('iter', np.int64(7))
    return hub.state_dict()


@pytest.mark.parametrize('strategy', ['cos', 'linear'])
@pytest.mark.parametrize('layout', ['list', 'dict'])
def test_onecycle_state_survives_weights_only_loading(strategy, layout):
    scheduler = _scheduler(strategy)
    for _ in range(5):
        scheduler.optimizer.step()
        scheduler.step()
    states = [scheduler.state_dict()]
    checkpoint = dict(param_schedulers=states if layout == 'list' else dict(
        opt=states))
    # without the hook torch's weights-only unpickler refuses the function
    with pytest.raises(Exception, match='getattr|Weights only load failed'):
        _weights_only_round_trip(checkpoint)

    hook = WeightsOnlyCheckpointHook()
    hook.before_save_checkpoint(None, checkpoint)
    loaded = _weights_only_round_trip(checkpoint)
    hook.after_load_checkpoint(None, loaded)
    state = (loaded['param_schedulers']
             if layout == 'list' else loaded['param_schedulers']['opt'])[0]
    assert state['anneal_func'] is scheduler.anneal_func

    resumed = _scheduler('linear' if strategy == 'cos' else 'cos')
    resumed.load_state_dict(state)
    assert resumed.anneal_func is scheduler.anneal_func
    for _ in range(5):
        for s in (scheduler, resumed):
            s.optimizer.step()
            s.step()
        assert (resumed.optimizer.param_groups[0]['lr'] ==
                scheduler.optimizer.param_groups[0]['lr'])


def test_unknown_function_name_is_refused():
    checkpoint = dict(
        param_schedulers=[dict(anneal_func='mmlocat.function:Evil.run')])
    with pytest.raises(ValueError, match="'Evil.run' for 'anneal_func'"):
        WeightsOnlyCheckpointHook().after_load_checkpoint(None, checkpoint)


def test_message_hub_state_survives_weights_only_loading():
    hub_state = _hub_state('mmlocat_test_weights_only_hub')
    live = hub_state['log_scalars']['train/loss']
    checkpoint = dict(
        state_dict=dict(w=torch.ones(2)),
        message_hub=hub_state,
        meta=dict(epoch=np.float64(1.5), seed=np.int32(3)))
    # mmengine's own pickling: refused (getattr of the method table)
    with pytest.raises(pickle.UnpicklingError, match='getattr'):
        _weights_only_round_trip(checkpoint)

    WeightsOnlyCheckpointHook().before_save_checkpoint(None, checkpoint)
    assert hub_state['log_scalars']['train/loss'] is live  # not modified
    data = _save(checkpoint).getvalue()
    assert b'getattr' not in data and b'logging.history_buffer' not in data
    # the hub is plain data now; this checkpoint's numpy meta (mmengine
    # writes python numbers there) still needs the scoped globals
    with pytest.raises(pickle.UnpicklingError, match='numpy'):
        torch.load(io.BytesIO(data), weights_only=True)
    with mmengine_checkpoint_globals():
        loaded = torch.load(io.BytesIO(data), weights_only=True)
    WeightsOnlyCheckpointHook().after_load_checkpoint(None, loaded)
    for key in ('train/loss', 'train/lr'):
        buffer = loaded['message_hub']['log_scalars'][key]
        assert type(buffer) is HistoryBuffer
        original = hub_state['log_scalars'][key]
        assert buffer.data[0].dtype == original.data[0].dtype
        np.testing.assert_array_equal(buffer.data[0], original.data[0])
        np.testing.assert_array_equal(buffer.data[1], original.data[1])
    buffer = loaded['message_hub']['log_scalars']['train/loss']
    assert buffer.mean() == pytest.approx(1.0)
    assert buffer.statistics('max') == 2.0
    assert loaded['meta']['epoch'] == 1.5
    # the loaded hub restores as mmengine's own
    hub = MessageHub.get_instance('mmlocat_test_weights_only_hub_loaded')
    hub.load_state_dict(loaded['message_hub'])
    assert hub.get_scalar('train/loss').current() == 2.0
    assert hub.get_info('iter') == 7
    # with mmengine's own (python) meta, nothing needs allowing at all: a
    # host's tools/test.py (a plain Runner) reads the checkpoint
    checkpoint = dict(
        state_dict=dict(w=torch.ones(2)),
        message_hub=_hub_state('mmlocat_test_weights_only_hub_plain'),
        meta=dict(epoch=1, seed=3))
    WeightsOnlyCheckpointHook().before_save_checkpoint(None, checkpoint)
    plain = torch.load(_save(checkpoint), weights_only=True)
    assert plain['meta'] == dict(epoch=1, seed=3)
    assert plain['message_hub']['runtime_info']['iter'] == 7


def test_globals_are_scoped_and_nest():
    registered = set(torch.serialization.get_safe_globals())
    assert HistoryBuffer not in registered
    with mmengine_checkpoint_globals():
        with mmengine_checkpoint_globals():
            assert HistoryBuffer in torch.serialization.get_safe_globals()
        # the inner context removed nothing the outer one added
        assert HistoryBuffer in torch.serialization.get_safe_globals()
        # extra types: only those not yet allowed come and go
        with mmengine_checkpoint_globals([np.ndarray, argparse.Namespace]):
            assert argparse.Namespace in torch.serialization.get_safe_globals()
        assert argparse.Namespace not in torch.serialization.get_safe_globals()
        assert np.ndarray in torch.serialization.get_safe_globals()
    assert set(torch.serialization.get_safe_globals()) == registered
    # a user's own registration outlives the context
    torch.serialization.add_safe_globals([HistoryBuffer])
    try:
        with mmengine_checkpoint_globals():
            pass
        assert HistoryBuffer in torch.serialization.get_safe_globals()
    finally:
        torch.serialization.clear_safe_globals()
        torch.serialization.add_safe_globals(list(registered))


def test_arbitrary_globals_still_rejected():
    with mmengine_checkpoint_globals(), pytest.raises(pickle.UnpicklingError):
        torch.load(_save(dict(fn=print)), weights_only=True)


def test_the_run_allows_the_types_between_before_and_after_run():
    hook = WeightsOnlyCheckpointHook()
    hook.before_run(None)
    try:
        assert HistoryBuffer in torch.serialization.get_safe_globals()
    finally:
        hook.after_run(None)
    assert HistoryBuffer not in torch.serialization.get_safe_globals()
