"""GAugStatsHook: logs per-block GAug statistics on logging iterations."""
import copy
import math
import types

import pytest
import torch
import torch.nn.functional as F
from helpers.tiny_archs import TINY_VIT
from mmengine.logging import MessageHub
from mmengine.model import BaseModel
from mmengine.registry import DefaultScope
from torch.utils.data import Dataset

import mmlocat  # noqa: F401
from mmlocat.engine import GAugStatsHook
from mmlocat.models.backbones import LocAtViT

TINY = TINY_VIT


class ToyModel(BaseModel):

    def __init__(self):
        super().__init__()
        self.backbone = LocAtViT(arch=TINY, img_size=32)

    def forward(self, inputs, labels=None, mode='tensor'):
        out = self.backbone(inputs)[0]
        if mode == 'loss':
            return dict(loss=out.pow(2).mean())
        return out


class ToyData(Dataset):

    def __len__(self):
        return 8

    def __getitem__(self, index):
        gen = torch.Generator().manual_seed(index)
        return dict(inputs=torch.rand(3, 32, 48, generator=gen))


@pytest.fixture
def restore_default_scope():
    """The Runner sets a global default scope; do not leak it."""
    saved = copy.deepcopy(DefaultScope._instance_dict)
    yield
    DefaultScope._instance_dict = saved


def test_hook_in_a_training_run(tmp_path, restore_default_scope):
    from mmengine.runner import Runner
    runner = Runner(
        model=ToyModel(),
        work_dir=str(tmp_path),
        train_dataloader=dict(
            dataset=ToyData(),
            sampler=dict(type='DefaultSampler', shuffle=False),
            collate_fn=dict(type='default_collate'),
            batch_size=2,
            num_workers=0),
        optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1)),
        train_cfg=dict(by_epoch=False, max_iters=4),
        custom_hooks=[dict(type='mmlocat.GAugStatsHook', interval=2)],
        default_hooks=dict(logger=dict(type='LoggerHook', interval=2)),
        default_scope='mmengine')
    runner.train()
    hub = runner.message_hub
    for block in (0, 1):
        for stat in ('var', 'alpha'):
            history = hub.get_scalar(f'gaug/{stat}_block{block}')
            values = history.data[0]
            assert len(values) == 2  # iterations 2 and 4 only
            assert all(math.isfinite(v) and v > 0 for v in values)
    for layer in runner.model.backbone.layers:
        assert not layer.attn.gaug._forward_hooks  # hooks removed


def test_hook_values_match_spec_and_skip_other_iterations():
    torch.manual_seed(0)
    model = ToyModel()
    runner = types.SimpleNamespace(
        model=model, iter=0, message_hub=MessageHub('gaug_stats_test'))
    hook = GAugStatsHook(interval=3)
    captured = {}

    def capture(module, args, output):
        captured[id(module)] = args[0].detach()

    x = torch.rand(2, 3, 48, 64)
    for it in range(3):
        runner.iter = it
        hook.before_train_iter(runner, it)
        gaugs = [layer.attn.gaug for layer in model.backbone.layers]
        registered = [len(g._forward_hooks) for g in gaugs]
        assert registered == ([1, 1] if it == 2 else [0, 0])
        handles = [g.register_forward_hook(capture) for g in gaugs]
        model(x)
        for h in handles:
            h.remove()
        hook.after_train_iter(runner, it)
        if it < 2:
            assert 'gaug/var_block0' not in runner.message_hub.log_scalars
    for block, gaug in enumerate(gaugs):
        q = captured[id(gaug)][:, :, 1:]
        cap = 4  # max(2, 2)^2 for img_size 32, patch 16
        var = cap * torch.sigmoid(gaug.log_var(q) - math.log(cap - 1))
        var = var * (min(3, 4) / 2)  # 48x64 input: 3x4 grid
        alpha = F.softplus(gaug.log_alpha(q))
        hub = runner.message_hub
        assert hub.get_scalar(f'gaug/var_block{block}').current() == \
            pytest.approx(var.mean().item(), rel=1e-5)
        assert hub.get_scalar(f'gaug/alpha_block{block}').current() == \
            pytest.approx(alpha.mean().item(), rel=1e-5)


def test_hook_rejects_bad_interval():
    with pytest.raises(ValueError, match='interval'):
        GAugStatsHook(interval=0)
