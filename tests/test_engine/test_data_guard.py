"""guard_runner_data on a real mmengine Runner: it wraps the dataloaders'
datasets (not the config), respects a config that wraps them itself and
registers SkippedFilesHook once for skip mode."""
import pytest
import torch
from mmengine.model import BaseModel
from mmengine.runner import Runner

import mmlocat  # noqa: F401
from mmlocat.engine.data_guard import guard_runner_data

DATASET = dict(type='mmseg.ADE20KDataset', data_root='unused', pipeline=[])


class Linear(BaseModel):

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(1, 1)

    def forward(self, inputs=None, data_samples=None, mode='tensor'):
        return self.fc(inputs)


def runner(tmp_path, dataset=DATASET, **cfg):
    loader = dict(
        dataset=dataset, sampler=dict(type='DefaultSampler'), batch_size=1)
    return Runner(
        model=Linear(),
        work_dir=str(tmp_path),
        train_dataloader=loader,
        train_cfg=dict(by_epoch=True, max_epochs=1),
        optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1)),
        val_dataloader=dict(loader),
        val_cfg=dict(),
        val_evaluator=dict(type='mmseg.IoUMetric'),
        cfg=dict(model=dict(), train_dataloader=loader, **cfg))


def hooks(run):
    return [type(h).__name__ for h in run.hooks].count('SkippedFilesHook')


def test_wraps_the_loaders_not_the_config(tmp_path):
    run = runner(tmp_path, checked_dataset=dict(seg_map_size='resize'))
    guard_runner_data(run, 'skip')
    assert run._train_dataloader['dataset'] == dict(
        type='mmlocat.CheckedDataset',
        dataset=DATASET,
        on_error='skip',
        seg_map_size='resize')
    assert run._val_dataloader['dataset']['on_error'] == 'raise'
    assert run.cfg.train_dataloader.dataset == DATASET
    assert hooks(run) == 1


def test_a_config_that_wraps_its_dataset_keeps_it(tmp_path):
    own = dict(type='mmlocat.CheckedDataset', dataset=DATASET, on_error='skip')
    run = runner(
        tmp_path, own, custom_hooks=[dict(type='mmlocat.SkippedFilesHook')])
    guard_runner_data(run)
    assert run._train_dataloader['dataset'] == own
    # the config lists the hook (Runner.from_cfg registers it): none added
    assert hooks(run) == 0
    with pytest.raises(ValueError, match='on_error must be one of'):
        guard_runner_data(runner(tmp_path), 'ignore')
