"""mmengine checkpoints load under torch's weights-only default."""
import pickle

import numpy as np
import pytest
import torch
from mmengine.logging import HistoryBuffer, MessageHub

import mmlocat  # noqa: F401  (registers the safe globals)


def _message_hub_state() -> dict:
    hub = MessageHub.get_instance('mmlocat_test_safe_load')
    for i in range(3):
        hub.update_scalar('train/loss', float(i))
    hub.update_info('iter', np.int64(7))
    return hub.state_dict()


def test_message_hub_state_loads_weights_only(tmp_path):
    path = tmp_path / 'ckpt.pth'
    torch.save(
        dict(
            state_dict=dict(w=torch.ones(2)),
            message_hub=_message_hub_state(),
            meta=dict(epoch=np.float64(1.5), seed=np.int32(3))), path)
    loaded = torch.load(path, weights_only=True)
    buffer = loaded['message_hub']['log_scalars']['train/loss']
    assert isinstance(buffer, HistoryBuffer)
    assert buffer.mean() == pytest.approx(1.0)
    assert buffer.statistics('max') == 2.0
    assert loaded['meta']['epoch'] == 1.5


def test_history_buffer_pickles_without_getattr():
    buffer = HistoryBuffer([1., 2.], [1, 1])
    data = pickle.dumps(buffer, protocol=2)
    assert b'getattr' not in data
    restored = pickle.loads(data)
    assert restored.statistics('mean') == 1.5


def test_arbitrary_globals_still_rejected(tmp_path):
    path = tmp_path / 'evil.pth'
    torch.save(dict(fn=print), path)
    with pytest.raises(pickle.UnpicklingError):
        torch.load(path, weights_only=True)
