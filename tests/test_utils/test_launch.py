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
    old.unlink()
    new.unlink()
    assert resolve_resume(work, None) == (False, None)
