"""mmlocat's runtime (issue 37): what ``runner_type =
'mmlocat.MMLocatRunner'`` adds to a config and the seed a resumed run takes
from its checkpoint. That every shipped recipe declares it is
tests/test_configs/test_shipped_runtime.py (beside the session's parsed
configs)."""
import logging
import os.path as osp

import pytest
import torch
from mmengine.config import Config

from mmlocat.engine.runtime import (RUNNER_TYPE, apply_runtime, resumed_seed,
                                    short_run_log_interval)
from mmlocat.utils.launch import load_config

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))

# an epoch-based mmpretrain config (by_epoch=True), an mmdet one naming
# EpochBasedTrainLoop, and an iteration-based mmseg one
RESUMABLE = {
    'configs/locat/locat-t_8xb128_in1k.py':
    'mmlocat.ResumableEpochBasedTrainLoop',
    'configs/ovd/fvit_clip-b16_ov-coco.py':
    'mmlocat.ResumableEpochBasedTrainLoop',
    'configs/locat/upernet_locat-b_ade20k.py': 'IterBasedTrainLoop',
}


@pytest.mark.parametrize('config', sorted(RESUMABLE))
def test_shipped_configs_get_the_runtime(config):
    from mmengine.registry import HOOKS, LOOPS, init_default_scope

    cfg = load_config(osp.join(REPO, config))
    before = dict(cfg.train_cfg)
    assert cfg.runner_type == RUNNER_TYPE  # the runtime base
    applied = apply_runtime(cfg)
    assert apply_runtime(cfg) == []  # idempotent: nothing added twice
    assert len(applied) >= 5  # each change is said
    hooks = [h['type'] for h in cfg.custom_hooks]
    assert hooks.count('mmlocat.RNGStateHook') == 1
    assert hooks.count('mmlocat.PreemptionHook') == 1
    assert hooks.count('mmlocat.WeightsOnlyCheckpointHook') == 1
    assert hooks.count('mmlocat.RecordHook') == 1
    assert cfg.default_hooks.checkpoint.type == 'mmlocat.AtomicCheckpointHook'
    loop = RESUMABLE[config]
    if loop.startswith('mmlocat.'):
        assert cfg.train_cfg.type == loop
        assert 'by_epoch' not in cfg.train_cfg
        rest = {
            k: v
            for k, v in before.items() if k not in ('by_epoch', 'type')
        }
        assert {k: v for k, v in cfg.train_cfg.items() if k != 'type'} == rest
    else:
        assert cfg.train_cfg == before  # not an epoch loop: untouched
    # the names resolve from the host's scope, as the Runner builds them
    init_default_scope(cfg.default_scope)
    for name in (*hooks, cfg.default_hooks.checkpoint.type):
        assert HOOKS.get(name) is not None, name
    if loop.startswith('mmlocat.'):
        assert LOOPS.get(loop).__name__ == loop.split('.')[1]


def test_other_loops_and_hooks_are_kept():
    cfg = Config(
        dict(
            train_cfg=dict(type='mmdet.MyLoop', max_epochs=2),
            default_hooks=dict(checkpoint=dict(type='MyCheckpointHook')),
            custom_hooks=[dict(type='mmlocat.PreemptionHook', requeue=False)]))
    apply_runtime(cfg)
    assert cfg.train_cfg.type == 'mmdet.MyLoop'
    assert cfg.default_hooks.checkpoint.type == 'MyCheckpointHook'
    assert cfg.custom_hooks == [
        dict(type='mmlocat.PreemptionHook', requeue=False),
        dict(type='mmlocat.RNGStateHook'),
        dict(type='mmlocat.WeightsOnlyCheckpointHook'),
        dict(type='mmlocat.RecordHook')
    ]


def test_a_resumed_run_takes_its_checkpoints_seed(tmp_path):
    work = tmp_path / 'work'
    work.mkdir()
    checkpoint = work / 'iter_4.pth'
    torch.save(dict(meta=dict(seed=1234), state_dict={}), str(checkpoint))
    (work / 'last_checkpoint').write_text(str(checkpoint))
    cfg = Config(dict(work_dir=str(work), resume=True))
    assert resumed_seed(cfg) == 1234
    applied = apply_runtime(cfg)
    assert cfg.randomness.seed == 1234
    assert (logging.INFO, 'randomness.seed = 1234 (recorded by the '
            'checkpoint this run resumes)') in applied
    # a named checkpoint, the config's own seed, a fresh run
    assert resumed_seed(Config(dict(resume=True,
                                    load_from=str(checkpoint)))) == 1234
    assert resumed_seed(
        Config(dict(work_dir=str(work), resume=True,
                    randomness=dict(seed=7)))) is None
    assert resumed_seed(Config(dict(work_dir=str(work)))) is None


def test_mixed_precision_falls_back_on_a_machine_without_cuda():
    """Every AMP recipe runs a CPU trial (mmengine's AmpOptimWrapper
    asserts a GPU at build), with one warning; with CUDA nothing changes."""
    cfg = load_config(osp.join(REPO, 'configs/locat/locat-t_8xb128_in1k.py'))
    cfg.optim_wrapper.type = 'AmpOptimWrapper'
    cfg.optim_wrapper.loss_scale = 'dynamic'
    before = dict(cfg.optim_wrapper)
    applied = apply_runtime(cfg)
    if torch.cuda.is_available():
        assert dict(cfg.optim_wrapper) == before
        return
    assert cfg.optim_wrapper.type == 'OptimWrapper'
    assert 'loss_scale' not in cfg.optim_wrapper
    assert cfg.optim_wrapper.optimizer == before['optimizer']
    assert [line for level, line in applied if level == logging.WARNING] == [
        'optim_wrapper: AmpOptimWrapper -> OptimWrapper (no CUDA '
        'here: mixed precision needs a GPU; this run trains in '
        'fp32)'
    ]


def test_a_short_run_logs_its_first_iterations():
    """A 2-iteration UperNet smoke run (the hosts log every 50) logs every
    iteration; a 100-iteration run every 10; the full schedule and an
    epoch-based run are untouched."""
    cfg = load_config(
        osp.join(REPO, 'configs/locat/upernet_locat-t_ade20k.py'))
    assert cfg.default_hooks.logger.interval == 50
    assert cfg.train_cfg.type == 'IterBasedTrainLoop'
    full = cfg.train_cfg.max_iters
    assert short_run_log_interval(cfg) is None
    assert cfg.default_hooks.logger.interval == 50
    for max_iters, want in ((2, 1), (100, 10), (499, 49)):
        cfg.default_hooks.logger.interval = 50
        cfg.train_cfg.max_iters = max_iters
        line = short_run_log_interval(cfg)
        assert cfg.default_hooks.logger.interval == want, max_iters
        assert line == (f'default_hooks.logger.interval = {want} (was 50: '
                        f'a {max_iters}-iteration run logs its first '
                        'iterations)')
    cfg.train_cfg.max_iters = full
    cfg.default_hooks.logger.interval = 50
    epochs = Config(
        dict(
            train_cfg=dict(by_epoch=True, max_epochs=1),
            default_hooks=dict(logger=dict(type='LoggerHook', interval=50))))
    assert short_run_log_interval(epochs) is None
    assert epochs.default_hooks.logger.interval == 50
