import io

import pytest
import torch
from mmengine.optim.scheduler import OneCycleLR

from mmlocat.engine.hooks import SchedulerStateHook


def _scheduler(strategy: str) -> OneCycleLR:
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=0.1)
    return OneCycleLR(
        optimizer, eta_max=0.1, total_steps=20, anneal_strategy=strategy)


def _weights_only_round_trip(checkpoint: dict) -> dict:
    buffer = io.BytesIO()
    torch.save(checkpoint, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


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

    hook = SchedulerStateHook()
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
        SchedulerStateHook().after_load_checkpoint(None, checkpoint)
