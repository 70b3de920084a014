"""Bad checkpoint files: content sniffing and the converters' error path.

Every converter gets every kind of bad file and must answer with one line
``NAME: error: ...`` on stderr and exit status 2, never a traceback.
"""
import argparse
import os
import os.path as osp
import pickle
import resource
import runpy
import subprocess
import sys

import pytest
import torch
from helpers.harness import run_tool
from safetensors.torch import save_file

from mmlocat.utils.checkpoint_io import (CheckpointWriteError, read_checkpoint,
                                         read_state_dict,
                                         remove_stale_temporaries, run_cli,
                                         save_checkpoint, save_converted,
                                         sniff_checkpoint, write_atomic)

CONVERTERS = ('locat2mmlocat', 'last_vit2mmlocat', 'clip2mmlocat',
              'eva02_clip2mmlocat', 'dino2mmlocat', 'lastclip2mmlocat')


def converter_args(script: str) -> list:
    """Options a converter requires besides SRC DST (clip2mmlocat's
    activation, where the script has that option)."""
    with open(script) as f:
        source = f.read()
    if osp.basename(script) == 'clip2mmlocat.py' and "'--act'" in source:
        return ['--act', 'quick_gelu']
    return []


def _tensors() -> dict:
    return {'w': torch.arange(6.).reshape(2, 3), 'b': torch.ones(3)}


def _torch_zip(path: str, obj=None) -> str:
    torch.save(_tensors() if obj is None else obj, path)
    return path


def _truncate(path: str, keep: float = 0.5) -> str:
    with open(path, 'rb') as f:
        data = f.read()
    with open(path, 'wb') as f:
        f.write(data[:int(len(data) * keep)])
    return path


def _write(path: str, data: bytes) -> str:
    with open(path, 'wb') as f:
        f.write(data)
    return path


def _torchscript(path: str) -> str:
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), path)
    return path


def _nan(path: str) -> str:
    tensors = _tensors()
    tensors['w'][0, 1] = float('nan')
    tensors['b'][2] = float('inf')
    return _torch_zip(path, tensors)


class _Foreign:  # an object outside torch's weights-only allow-list
    pass


# kind -> (file name, writer, phrase the error must contain)
BAD_FILES = {
    'missing': ('nope.pth', None, 'not found'),
    'directory': ('a_dir.pth', 'dir', 'directory'),
    'empty_pth': ('empty.pth', lambda p: _write(p, b''), 'empty (0 bytes)'),
    'empty_safetensors':
    ('empty.safetensors', lambda p: _write(p, b''), 'empty (0 bytes)'),
    'random_bytes': ('noise.pth', lambda p: _write(p, bytes(range(7, 71))),
                     'not a checkpoint'),
    'text': ('readme.safetensors', lambda p: _write(p, b'hello world\n' * 4),
             'not a checkpoint'),
    'truncated_torch': ('cut.pth', lambda p: _truncate(_torch_zip(p)),
                        'truncated or corrupt'),
    'truncated_safetensors':
    ('cut.safetensors', lambda p: _truncate(_save_safetensors(p), 0.9),
     'truncated or corrupt'),
    'corrupt_safetensors_header':
    ('bad.safetensors',
     lambda p: _write(p, (10**9).to_bytes(8, 'little') + b'{"a": 1}'),
     'truncated or corrupt'),
    'torchscript': ('scripted.pth', _torchscript, 'TorchScript'),
    'foreign_objects':
    ('objects.pth', lambda p: _torch_zip(p, {'x': _Foreign()}),
     'objects other than tensors'),
    'no_tensors': ('meta.pth', lambda p: _torch_zip(p, {'epoch': 3}),
                   'does not contain a state dict of tensors'),
    'nan_weights': ('nan.pth', _nan, 'NaN/inf'),
}


def _save_safetensors(path: str) -> str:
    save_file(_tensors(), path)
    return path


def _make(tmp_path, kind: str) -> str:
    name, writer, _ = BAD_FILES[kind]
    path = str(tmp_path / name)
    if writer == 'dir':
        os.mkdir(path)
    elif writer is not None:
        writer(path)
    return path


@pytest.mark.parametrize('kind', sorted(BAD_FILES))
@pytest.mark.parametrize('converter', CONVERTERS)
def test_every_converter_refuses_every_bad_file(converter, kind, tmp_path,
                                                repo_root, monkeypatch,
                                                capsys):
    if converter == 'clip2mmlocat' and kind == 'torchscript':
        pytest.skip('clip2mmlocat reads TorchScript (OpenAI CLIP); '
                    'covered by test_clip_torchscript_with_nan_is_refused')
    src = _make(tmp_path, kind)
    dst = str(tmp_path / 'out.pth')
    script = osp.join(repo_root, 'tools', 'model_converters',
                      f'{converter}.py')
    monkeypatch.setattr(sys, 'argv',
                        [script, src, dst, *converter_args(script)])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_path(script, run_name='__main__')
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f'{converter}: error: '), err
    assert BAD_FILES[kind][2] in lines[0], err
    assert 'Traceback' not in err and 'weights_only=False' not in err
    assert not osp.exists(dst)


@pytest.mark.e2e
def test_clip_torchscript_with_nan_is_refused(tmp_path, repo_root,
                                              subprocess_env):
    """A real process on a traced open_clip tower with a NaN weight: exit 2,
    one error line, no traceback, nothing written."""
    from open_clip.transformer import VisionTransformer
    torch.manual_seed(0)
    tower = VisionTransformer(
        image_size=32,
        patch_size=16,
        width=32,
        layers=1,
        heads=2,
        mlp_ratio=2.0,
        output_dim=16).eval()
    traced = torch.jit.trace(
        tower, torch.randn(1, 3, 32, 32), check_trace=False)
    with torch.no_grad():
        traced.conv1.weight[0, 0, 0, 0] = float('nan')
    src = str(tmp_path / 'ViT-B-16.pt')
    torch.jit.save(traced, src)
    dst = str(tmp_path / 'out.pth')
    script = osp.join(repo_root, 'tools', 'model_converters',
                      'clip2mmlocat.py')
    proc = run_tool(script, src, dst, *converter_args(script))
    assert proc.returncode == 2, proc.stderr
    errors = [
        line for line in proc.stderr.splitlines()
        if line.startswith('clip2mmlocat: error: ')
    ]
    assert len(errors) == 1, proc.stderr
    assert 'NaN/inf' in errors[0], proc.stderr
    # named as the archive stores it, before any conversion
    assert f'{src} has NaN/inf values in 1 tensor(s): conv1.weight' in \
        errors[0], proc.stderr
    assert 'Traceback' not in proc.stderr
    assert not osp.exists(dst)


@pytest.mark.parametrize('name',
                         ['weights.safetensors', 'weights.pth', 'weights.bin'])
@pytest.mark.parametrize('fmt', ['torch-zip', 'safetensors', 'legacy'])
def test_content_decides_not_the_name(fmt, name, tmp_path):
    path = str(tmp_path / name)
    if fmt == 'safetensors':
        _save_safetensors(path)
    elif fmt == 'legacy':
        torch.save(_tensors(), path, _use_new_zipfile_serialization=False)
    else:
        _torch_zip(path, dict(state_dict=_tensors(), meta={}))
    assert sniff_checkpoint(path) == {'legacy': 'torch-legacy'}.get(fmt, fmt)
    loaded = read_state_dict(path)
    assert sorted(loaded) == ['b', 'w']
    torch.testing.assert_close(loaded['w'], _tensors()['w'])


def test_sniff_torchscript_and_legacy_pickle(tmp_path):
    assert sniff_checkpoint(_torchscript(str(tmp_path / 'a.pt'))) == \
        'torchscript'
    plain = str(tmp_path / 'plain.pkl')
    with open(plain, 'wb') as f:
        pickle.dump({'w': 1}, f)  # a pickle, but not one torch wrote
    with pytest.raises(ValueError, match='a Python pickle, not a PyTorch'):
        sniff_checkpoint(plain)


def test_save_checkpoint_refuses_non_finite(tmp_path):
    path = str(tmp_path / 'out.pth')
    with pytest.raises(ValueError, match=r'NaN/inf values in 1 tensor'):
        save_checkpoint({'w': torch.tensor([1., float('inf')])}, path)
    assert not osp.exists(path)
    save_checkpoint({'w': torch.ones(2), 'n': torch.arange(3)}, path)
    assert read_state_dict(path)['n'].tolist() == [0, 1, 2]


def test_save_converted_prefixes_keys_and_records_provenance(tmp_path):
    path = str(tmp_path / 'out.pth')
    src = str(tmp_path / 'sub' / 'weights.bin')
    weights = {'a.w': torch.ones(2), 'b': torch.arange(3)}
    count = save_converted(
        weights, path, src, 'x2mmlocat', 'backbone.', clip=dict(model='M'))
    assert count == 2
    ckpt = torch.load(path, map_location='cpu', weights_only=True)
    assert list(ckpt['state_dict']) == ['backbone.a.w', 'backbone.b']
    assert ckpt['state_dict']['backbone.b'].tolist() == [0, 1, 2]
    assert ckpt['meta'] == dict(
        source='weights.bin', converter='x2mmlocat', clip=dict(model='M'))
    with pytest.raises(ValueError, match='NaN/inf'):
        save_converted({'w': torch.tensor([float('nan')])}, path + '2', src,
                       'x2mmlocat')
    assert not osp.exists(path + '2')


def _leftovers(folder) -> list:
    return [f for f in os.listdir(folder) if f.endswith('.tmp')]


def test_failed_write_keeps_the_previous_file(tmp_path):
    """A write that fails half-way (the file size limit makes write()
    fail with EFBIG, as a full disk fails with ENOSPC) leaves the old
    checkpoint byte for byte and no temporary file."""
    path = str(tmp_path / 'model.pth')
    save_checkpoint(_tensors(), path)
    with open(path, 'rb') as f:
        before = f.read()
    big = {'w': torch.ones(64, 1024)}  # 256 kB, over the limit below
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    # Python ignores SIGXFSZ, so the write fails with an error instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, hard))
    try:
        with pytest.raises(CheckpointWriteError) as info:
            save_checkpoint(big, path)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert str(info.value) == (
        f'cannot write {path}: the file size limit is exceeded (File too '
        'large); the previous file is unchanged')
    assert info.value.errno == 27  # EFBIG
    with open(path, 'rb') as f:
        assert f.read() == before
    assert _leftovers(tmp_path) == []
    save_checkpoint(big, path)  # and a write that fits replaces it
    assert read_state_dict(path)['w'].shape == (64, 1024)


def test_directory_in_the_way_and_writer_errors(tmp_path):
    path = str(tmp_path / 'iter_6.pth')
    os.mkdir(path)
    with pytest.raises(
            CheckpointWriteError,
            match=r'cannot write .*iter_6.pth: a directory is in the way '
            r'\(Is a directory\); nothing was written'):
        save_checkpoint(_tensors(), path)
    assert os.listdir(path) == [] and _leftovers(tmp_path) == []

    # an error of the writer itself: propagated, nothing left behind
    target = str(tmp_path / 'x.bin')

    def fail(f):
        f.write(b'partial')
        raise RuntimeError('serialisation failed')

    with pytest.raises(RuntimeError, match='serialisation failed'):
        write_atomic(target, fail)
    assert not osp.exists(target) and _leftovers(tmp_path) == []


def test_atomic_file_gets_the_usual_permissions(tmp_path):
    umask = os.umask(0o022)
    try:
        write_atomic(str(tmp_path / 'a.bin'), lambda f: f.write(b'x'))
    finally:
        os.umask(umask)
    assert os.stat(tmp_path / 'a.bin').st_mode & 0o777 == 0o644


def test_converter_cli_names_a_failed_write(tmp_path, capsys):
    dst = str(tmp_path / 'out.pth')
    os.mkdir(dst)
    with pytest.raises(SystemExit) as info:
        run_cli('x2mmlocat', lambda: save_checkpoint(_tensors(), dst))
    assert info.value.code == 2
    assert capsys.readouterr().err == (
        f'x2mmlocat: error: cannot write {dst}: a directory is in the way '
        '(Is a directory); nothing was written\n')


def test_read_checkpoint_allows_extra_types_for_one_read(tmp_path):
    """A DINO training checkpoint pickles its argparse arguments: refused
    by the weights-only reader unless allowed, and only for that read."""
    path = str(tmp_path / 'dino.pth')
    torch.save(
        dict(teacher={'w': torch.ones(2)}, args=argparse.Namespace(a=1)), path)
    with pytest.raises(ValueError, match='objects other than tensors'):
        read_checkpoint(path)
    obj = read_checkpoint(path, safe_globals=[argparse.Namespace])
    assert obj['args'].a == 1 and torch.equal(obj['teacher']['w'],
                                              torch.ones(2))
    with pytest.raises(ValueError, match='objects other than tensors'):
        read_checkpoint(path)


# -- temporary files of interrupted writes (issue 33) -----------------------
_WRITER = '''
import os, signal, sys
from mmlocat.utils.checkpoint_io import write_atomic

def write(f):
    f.write(b'x' * 65536)
    f.flush()
    os.kill(os.getpid(), getattr(signal, sys.argv[2]))

write_atomic(sys.argv[1], write)
'''


def _killed_writer(path: str, signame: str, env) -> int:
    """A process killed by ``signame`` in the middle of
    ``write_atomic(path)``; returns its exit status."""
    proc = subprocess.run([sys.executable, '-c', _WRITER, path, signame],
                          env=env,
                          capture_output=True,
                          text=True,
                          timeout=120)
    return proc.returncode


def test_sigterm_during_a_write_leaves_no_temporary_file(
        tmp_path, subprocess_env):
    """SIGTERM (default action: die) during the write: the process exits
    with 143 through SystemExit and removes its temporary file."""
    path = str(tmp_path / 'model.pth')
    assert _killed_writer(path, 'SIGTERM', subprocess_env) == 143
    assert _leftovers(tmp_path) == [] and not osp.exists(path)


def test_kill_9_leftover_is_removed_by_the_next_write(tmp_path,
                                                      subprocess_env):
    """What only ``kill -9`` leaves (a hidden temporary file of the
    checkpoint's size) is removed by the next write of that file, with one
    log line naming it, its size and the dead pid."""
    path = str(tmp_path / 'iter_4.pth')
    assert _killed_writer(path, 'SIGKILL', subprocess_env) == -9
    (leftover, ) = _leftovers(tmp_path)
    pid = int(leftover.split('.')[-3])  # .iter_4.pth.PID.HEX.tmp
    full = str(tmp_path / leftover)
    assert osp.getsize(full) == 65536 and not osp.exists(path)
    # the next run comes later than STALE_AFTER_S
    os.utime(full, (1, 1))
    lines = []

    class _Logger:
        warning = lines.append

    assert remove_stale_temporaries(path, _Logger) == [full]
    assert lines == [
        f'removed {full} (64.0 kB), the temporary file of an interrupted '
        f'write of {path} by process {pid}, which is not running on this host'
    ]
    assert _leftovers(tmp_path) == []

    # and write_atomic itself does it
    assert _killed_writer(path, 'SIGKILL', subprocess_env) == -9
    (leftover, ) = _leftovers(tmp_path)
    os.utime(tmp_path / leftover, (1, 1))
    save_checkpoint(_tensors(), path)
    assert _leftovers(tmp_path) == [] and read_state_dict(path)


def test_live_recent_and_other_files_temporaries_are_kept(tmp_path):
    path = str(tmp_path / 'iter_4.pth')
    dead = subprocess.Popen([sys.executable, '-c', 'pass'])
    dead.wait()  # reaped: its pid names no process
    old = (1, 1)

    def temp(name: str, when=old) -> str:
        full = str(tmp_path / name)
        with open(full, 'wb') as f:
            f.write(b'x' * 10)
        if when is not None:
            os.utime(full, when)
        return full

    stale = temp(f'.iter_4.pth.{dead.pid}.0badc0de.tmp')
    # lastclip2mmlocat.py's own temporaries have no random part
    stale_plain = temp(f'.iter_4.pth.{dead.pid}.tmp')
    live = temp(f'.iter_4.pth.{os.getppid()}.12345678.tmp')
    recent = temp(f'.iter_4.pth.{dead.pid}.abcdef01.tmp', when=None)
    other = temp(f'.iter_40.pth.{dead.pid}.0badc0de.tmp')
    user = temp(f'.iter_4.pth.{dead.pid}.notes.tmp')
    lines = []

    class _Logger:
        warning = lines.append

    assert remove_stale_temporaries(path,
                                    _Logger) == sorted([stale, stale_plain])
    assert sorted(_leftovers(tmp_path)) == sorted(
        osp.basename(p) for p in (live, recent, other, user))
    (kept, ) = [line for line in lines if line.startswith('kept')]
    assert kept.startswith(f'kept {recent} (10 bytes), the temporary file of')
    assert ' s ago (a write on another host of a shared file system?)' in kept


def test_a_host_training_checkpoint_is_named(tmp_path):
    """A checkpoint an mmengine Runner saved without mmlocat's runtime
    pickles getattr(HistoryBuffer, ...): refused, naming why and the fix
    (issue 37 item 4), not torch's advice to switch the check off."""
    from mmengine.logging import HistoryBuffer
    buffer = HistoryBuffer()
    buffer.update(1.0)
    path = str(tmp_path / 'iter_2.pth')
    torch.save(
        dict(
            state_dict=_tensors(),
            message_hub=dict(log_scalars={'train/loss': buffer})), path)
    with pytest.raises(ValueError) as info:
        read_checkpoint(path)
    message = str(info.value)
    assert message.startswith(f'{path} is a PyTorch file (torch-zip) holding '
                              'objects other than tensors')
    assert "saved without mmlocat's runtime" in message
    assert 'weights_only=False' in message  # the user's own, trusted step
    assert 'Weights only load failed' not in message
