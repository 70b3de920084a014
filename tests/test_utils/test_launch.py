"""Launch helpers: load_config (yapf formatting of the tools' config text
is optional, the unformatted dump is the same loadable config); --resume
checks; the rank a launcher gives before any process group exists."""
import os
import os.path as osp

import pytest
from mmengine.config import Config

from mmlocat.utils.launch import (FORMAT_ENV, EarlierRunError, launcher_rank,
                                  load_config, resolve_resume)

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
# an mmseg-based and an mmdet-based shipped config (bases, custom_imports)
CONFIGS = ('configs/locat/upernet_locat-b_ade20k.py',
           'configs/ovd/fvit_clip-b16_ov-coco.py')


@pytest.mark.parametrize('config', CONFIGS)
def test_unformatted_dump_loads_as_the_same_config(config, tmp_path,
                                                   monkeypatch):
    path = osp.join(REPO, config)
    reference = Config.fromfile(path)
    monkeypatch.setenv(FORMAT_ENV, '0')
    fast = load_config(path)
    assert fast.to_dict() == reference.to_dict()
    assert fast.filename == reference.filename
    assert fast.text == reference.text
    # not the yapf text: mmengine's raw layout, one entry per line
    assert fast.pretty_text != reference.pretty_text
    dumped = tmp_path / 'dumped.py'
    fast.dump(str(dumped))
    assert Config.fromfile(str(dumped)).to_dict() == reference.to_dict()


def test_formatting_is_the_default(tmp_path, monkeypatch):
    path = tmp_path / 'small.py'
    path.write_text("model = dict(type='X', layers=[dict(a=1), dict(b=2)])\n")
    formatted = Config.fromfile(str(path)).pretty_text
    monkeypatch.delenv(FORMAT_ENV, raising=False)
    assert load_config(str(path)).pretty_text == formatted
    monkeypatch.setenv(FORMAT_ENV, '1')
    assert load_config(str(path)).pretty_text == formatted
    monkeypatch.setenv(FORMAT_ENV, '0')
    assert load_config(str(path)).pretty_text != formatted


def test_bad_value_is_named(monkeypatch):
    monkeypatch.setenv(FORMAT_ENV, 'no')
    with pytest.raises(
            ValueError, match="MMLOCAT_FORMAT_CONFIG must be 0 "
            "or 1, got 'no'"):
        load_config(osp.join(REPO, CONFIGS[0]))


# -- resolve_resume / launcher_rank ------------------------------------


def test_resolve_resume(tmp_path):
    work = str(tmp_path)
    assert resolve_resume(work, None) == (False, None)
    resume, note = resolve_resume(work, 'auto')
    assert not resume and note == (
        f'--resume: no checkpoint to resume from in {work} (no '
        'last_checkpoint file): training starts from the beginning')
    with pytest.raises(
            FileNotFoundError,
            match=r'--resume: checkpoint not found: /no/x.pth'):
        resolve_resume(work, '/no/x.pth')
    with pytest.raises(IsADirectoryError, match='is a directory'):
        resolve_resume(work, work)
    assert resolve_resume(work, 's3://bucket/x.pth') == (True, None)

    ckpt = tmp_path / 'iter_3.pth'
    ckpt.write_bytes(b'x')
    (tmp_path / 'last_checkpoint').write_text(str(ckpt))
    assert resolve_resume(work, 'auto') == (True, None)
    assert resolve_resume(work, str(ckpt)) == (True, None)
    # a fresh run over them: refused (it used to warn), naming the
    # checkpoint and both ways on; --overwrite says what it allows
    with pytest.raises(EarlierRunError) as info:
        resolve_resume(work, None)
    assert str(info.value) == (
        f'{work} holds the checkpoints of an earlier run ({ckpt}); a fresh '
        'run would overwrite them: pass --resume to continue that run, '
        '--overwrite to start from the beginning and overwrite them, or use '
        'another --work-dir')
    resume, note = resolve_resume(work, None, overwrite=True)
    assert not resume and note.startswith(
        f'--overwrite: this run starts from the beginning in {work}, which '
        f'holds the checkpoints of an earlier run ({ckpt}): each checkpoint '
        'this run saves replaces the earlier one of the same name')
    ckpt.unlink()
    with pytest.raises(FileNotFoundError, match='which does not exist'):
        resolve_resume(work, 'auto')


def test_launcher_rank(monkeypatch):
    for key in ('RANK', 'SLURM_PROCID', 'OMPI_COMM_WORLD_RANK', 'PMI_RANK'):
        monkeypatch.delenv(key, raising=False)
    assert launcher_rank('pytorch') == 0
    monkeypatch.setenv('RANK', '3')
    monkeypatch.setenv('SLURM_PROCID', '5')
    monkeypatch.setenv('PMI_RANK', '7')
    assert launcher_rank('none') == 0  # no launcher: one process
    assert launcher_rank('pytorch') == 3
    assert launcher_rank('slurm') == 5
    assert launcher_rank('mpi') == 7


def test_fresh_run_over_checkpoints_without_last_checkpoint(tmp_path):
    """A ``*.pth`` alone (``last_checkpoint`` deleted, or an interval
    checkpoint of a run that never wrote it) also counts: the newest one
    is named."""
    work = str(tmp_path)
    old, new = tmp_path / 'iter_2.pth', tmp_path / 'iter_4.pth'
    old.write_bytes(b'a')
    new.write_bytes(b'b')
    os.utime(old, (1, 1))
    with pytest.raises(EarlierRunError, match=r'earlier run \(.*iter_4.pth\)'):
        resolve_resume(work, None)
    assert resolve_resume(work, None, overwrite=True)[0] is False
    (tmp_path / 'notes.txt').write_text('x')  # not a checkpoint
    (tmp_path / 'iter_6.pth').mkdir()  # a folder of that name neither
    old.unlink()
    new.unlink()
    assert resolve_resume(work, None) == (False, None)


# -- issue 35: overrides and component arguments checked at start ---------


def test_cfg_options_top_level_typo_is_refused():
    """mmengine's merge_from_dict created ``test_dataloder`` and the run
    evaluated the config's own data; ``randomnes.seed`` trained with the
    config's seed."""
    from mmlocat.utils.launch import merge_cfg_options
    path = osp.join(REPO, CONFIGS[0])
    cfg = load_config(path)
    root = cfg.test_dataloader.dataset.data_root
    with pytest.raises(ValueError) as info:
        merge_cfg_options(cfg, {'test_dataloder.dataset.data_root': '/x'})
    assert str(info.value) == (
        f"--cfg-options test_dataloder.dataset.data_root: {path} has no "
        "top-level key 'test_dataloder' (the override would be ignored); "
        "did you mean 'test_dataloader'? to add the key on purpose, pass "
        '--cfg-new-keys test_dataloder')
    assert 'test_dataloder' not in cfg  # nothing merged
    assert cfg.test_dataloader.dataset.data_root == root
    with pytest.raises(ValueError, match="did you mean 'randomness'"):
        merge_cfg_options(cfg, {'randomnes.seed': 123})
    # the config's keys, the Runner's and the tools' (not in this config)
    merge_cfg_options(
        cfg, {
            'test_dataloader.dataset.data_root': '/x',
            'randomness.seed': 123,
            'load_from': 'w.pth',
            'checked_dataset.on_error': 'skip',
            'find_unused_parameters': True
        })
    assert cfg.test_dataloader.dataset.data_root == '/x'
    assert cfg.randomness.seed == 123 and cfg.load_from == 'w.pth'
    # the escape: a new key on purpose
    merge_cfg_options(cfg, {'my_key.a': 1}, new_keys=['my_key'])
    assert cfg.my_key == dict(a=1)
    merge_cfg_options(cfg, None)  # no overrides: nothing to check


def _resumable(config):
    from mmlocat.engine.runtime import apply_runtime
    cfg = load_config(osp.join(REPO, config))
    apply_runtime(cfg)  # the types the runtime's Runner builds
    return cfg


# one config per host and kind of run (epoch / iteration loops, test-only)
CHECKED = ('configs/locat/locat-t_8xb128_in1k.py',
           'configs/locat/upernet_locat-b_ade20k.py',
           'configs/ovd/fvit_clip-b16_ov-coco.py',
           'configs/last/clip_last-b16_8xb64_cc3m.py',
           'configs/last/corloc_dino-s_voc07.py',
           'configs/last/zeroshot_clip-b16_voc20.py',
           'configs/demo/upernet_locat-t_tiny-ade20k.py')


@pytest.mark.parametrize('config', CHECKED)
def test_shipped_hooks_and_loops_pass_the_argument_check(config):
    from mmlocat.utils.launch import check_component_arguments
    check_component_arguments(_resumable(config))


@pytest.mark.parametrize('key,value,message', [
    ('default_hooks.checkpoint.intervl', 1,
     "default_hooks.checkpoint.intervl: AtomicCheckpointHook takes no "
     "argument 'intervl'; did you mean 'interval'?"),
    ('train_cfg.max_iter', 10, "train_cfg.max_iter: IterBasedTrainLoop "
     "takes no argument 'max_iter'; did you mean 'max_iters'?"),
    ('val_cfg.fp61', True, "val_cfg.fp61: ValLoop takes no argument 'fp61'; "
     "did you mean 'fp16'?"),
    ('custom_hooks.0.requeu', False, "custom_hooks.0.requeu: PreemptionHook "
     "takes no argument 'requeu'; did you mean 'requeue'?"),
])
def test_misspelt_hook_and_loop_keywords_fail_at_start(key, value, message):
    """mmengine's CheckpointHook passes unknown keywords on to
    Runner.save_checkpoint: ``intervl=1`` failed at the first save."""
    from mmlocat.utils.launch import check_component_arguments
    cfg = _resumable('configs/locat/upernet_locat-b_ade20k.py')
    cfg.custom_hooks.insert(0, dict(type='mmlocat.PreemptionHook'))
    cfg.merge_from_dict({key: value})
    with pytest.raises(ValueError) as info:
        check_component_arguments(cfg)
    assert str(info.value).startswith(message), str(info.value)
    assert str(info.value).endswith('(fix the config or --cfg-options)')


def test_config_dump_is_complete_or_absent_and_names_the_file(tmp_path):
    """Config.dump's bare open / write failed with ``[Errno 27] File too
    large`` naming no file and left half a config (the Runner dumps the
    tools' config through it; the run itself: tests/test_e2e/
    test_checkpoint_write_failure.py)."""
    import resource

    from mmlocat.utils.checkpoint_io import CheckpointWriteError
    cfg = load_config(osp.join(REPO, CONFIGS[0]))
    path = tmp_path / 'dumped.py'
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    # Python ignores SIGXFSZ, so the write fails with an error instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (1024, hard))
    try:
        with pytest.raises(CheckpointWriteError) as info:
            cfg.dump(str(path))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert str(info.value) == (
        f'cannot write {path}: the file size limit is exceeded (File too '
        'large); nothing was written (the copy of the config the run '
        'keeps): raise the file size limit (ulimit -f) and run again')
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    cfg.dump(str(path))
    assert Config.fromfile(str(path)).to_dict() == cfg.to_dict()
