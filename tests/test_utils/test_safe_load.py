"""Nothing mmlocat reads runs code (issue 33).

Crafted files whose unpickling would run ``os.mkdir(MARKER)``: a plain
pickle, torch's legacy layout with the payload in place of the magic
number, a torch zip with the payload inside, a TorchScript archive whose
``data.pkl`` is the payload, a ``.npy`` object array and an ``.npz`` named
``.npy``. Each goes through every reader (the library's readers and every
tool that reads such a file); the payload must not run and the error must
name the file and what it is. Each payload is first shown to be live (an
unsafe loader does run it), so the test can fail. A scan of ``mmlocat/``
and ``tools/`` finds any new unsafe load. The TorchScript data reader is
checked against ``torch.jit.load`` on archives of the real packages.
"""
import ast
import io
import json
import os
import os.path as osp
import pickle
import runpy
import sys
import zipfile

import numpy as np
import pytest
import torch
from helpers.tiny_archs import tiny_open_clip_cfg, tiny_vit

from mmlocat.utils import checkpoint_io, records
from mmlocat.utils.safe_load import load_array, read_torchscript_state_dict

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
_LEGACY_MAGIC_PICKLE = pickle.dumps(0x1950a86a20f9469cfc6c, protocol=2)


class Payload:
    """Runs ``os.mkdir(marker)`` when unpickled: what a hostile file runs."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.mkdir, (self.marker, )


def _plain_pickle(path: str, marker: str) -> None:
    with open(path, 'wb') as f:
        pickle.dump(Payload(marker), f, protocol=2)


def _legacy_layout(path: str, marker: str) -> None:
    """A real legacy ``torch.save`` file whose first pickle (the magic
    number) is replaced by the payload."""
    buffer = io.BytesIO()
    torch.save({'w': torch.ones(2)},
               buffer,
               _use_new_zipfile_serialization=False)
    data = buffer.getvalue()
    assert data.startswith(_LEGACY_MAGIC_PICKLE)
    with open(path, 'wb') as f:
        f.write(
            pickle.dumps(Payload(marker), protocol=2) +
            data[len(_LEGACY_MAGIC_PICKLE):])


def _torch_zip(path: str, marker: str) -> None:
    torch.save(
        dict(state_dict={'w': torch.ones(2)}, meta=dict(x=Payload(marker))),
        path)


def _torchscript(path: str, marker: str) -> None:
    """A real ``torch.jit.save`` archive whose ``data.pkl`` is the payload."""
    plain = path + '.plain'
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), plain)
    with zipfile.ZipFile(plain) as src, zipfile.ZipFile(path, 'w') as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename.endswith('/data.pkl'):
                data = pickle.dumps(Payload(marker), protocol=2)
            dst.writestr(info, data)
    os.remove(plain)


def _npy_objects(path: str, marker: str) -> None:
    with open(path, 'wb') as f:  # a path would get '.npy' appended
        np.save(
            f, np.array([Payload(marker)], dtype=object), allow_pickle=True)


def _npz_named_npy(path: str, marker: str) -> None:
    with open(path, 'wb') as f:
        np.savez(f, rows=np.array([Payload(marker)], dtype=object))


def _data_pkl(path: str) -> bytes:
    with zipfile.ZipFile(path) as archive:
        name = [n for n in archive.namelist() if n.endswith('/data.pkl')]
        return archive.read(name[0])


#: kind -> (writer, the unsafe load that runs it, words the error says)
CHECKPOINT_PAYLOADS = {
    'plain_pickle': (_plain_pickle, lambda p: pickle.load(open(p, 'rb')),
                     'is a Python pickle, not a PyTorch checkpoint'),
    'legacy_layout': (_legacy_layout, lambda p: pickle.load(open(p, 'rb')),
                      'is a Python pickle, not a PyTorch checkpoint'),
    'torch_zip': (_torch_zip, lambda p: torch.load(p, weights_only=False),
                  'holding objects other than tensors'),
    'torchscript':
    (_torchscript, lambda p: pickle.loads(_data_pkl(p)), 'TorchScript'),
}
ARRAY_PAYLOADS = {
    'npy_objects': (_npy_objects, lambda p: np.load(p, allow_pickle=True),
                    'holds an object array'),
    'npz_named_npy':
    (_npz_named_npy, lambda p: np.load(p, allow_pickle=True)['rows'],
     'is an .npz archive'),
}


def _crafted(tmp_path, kind: str, payloads: dict, name: str):
    """``(path, marker, words)`` of a fresh payload file."""
    writer, _, words = payloads[kind]
    marker = str(tmp_path / f'RAN_{kind}')
    path = str(tmp_path / name)
    writer(path, marker)
    return path, marker, words


@pytest.mark.parametrize('kind',
                         sorted([*CHECKPOINT_PAYLOADS, *ARRAY_PAYLOADS]))
def test_the_payloads_are_live(kind, tmp_path):
    """An unsafe loader runs each crafted file's payload (so the tests
    below can fail)."""
    payloads = (
        CHECKPOINT_PAYLOADS if kind in CHECKPOINT_PAYLOADS else ARRAY_PAYLOADS)
    path, marker, _ = _crafted(tmp_path, kind, payloads, 'x.bin')
    try:
        payloads[kind][1](path)
    except Exception:  # the payload returns None where data was expected
        pass
    assert osp.isdir(marker)


def _tiny_clip_config(tmp_path) -> str:
    path = str(tmp_path / 'tiny-clip.json')
    with open(path, 'w') as f:
        json.dump(tiny_open_clip_cfg(), f)
    return path


def _text_tower(path: str) -> None:
    from mmlocat.models.clip.text_tower import OpenCLIPTextTower
    OpenCLIPTextTower(
        model_cfg=tiny_open_clip_cfg()).load_open_clip_weights(path)


def _pretrained_init_cfg(path: str) -> None:
    from mmlocat.models.backbones import LocAtViT
    LocAtViT(
        arch=tiny_vit(),
        img_size=32,
        patch_size=16,
        init_cfg=dict(type='Pretrained', checkpoint=path)).init_weights()


def _model_weights(path: str) -> None:
    from mmlocat.models.backbones import LocAtViT
    from mmlocat.utils.pretrained import load_model_weights
    load_model_weights(
        LocAtViT(arch=tiny_vit(), img_size=32, patch_size=16), path)


#: the library's readers of checkpoint files (every tool reads through one)
LIBRARY_READERS = {
    'read_checkpoint': checkpoint_io.read_checkpoint,
    'read_state_dict': checkpoint_io.read_state_dict,
    'read_clip_state_dict': checkpoint_io.read_clip_state_dict,
    'load_model_weights': _model_weights,
    'pretrained_init_cfg': _pretrained_init_cfg,
    'clip_text_tower': _text_tower,
}


@pytest.mark.parametrize('kind', sorted(CHECKPOINT_PAYLOADS))
@pytest.mark.parametrize('reader', sorted(LIBRARY_READERS))
def test_library_readers_never_run_a_payload(reader, kind, tmp_path):
    path, marker, words = _crafted(tmp_path, kind, CHECKPOINT_PAYLOADS,
                                   'x.pth')
    if kind == 'torchscript' and reader in ('read_clip_state_dict',
                                            'clip_text_tower'):
        words = 'cannot be read as data'  # the CLIP readers read archives
    with pytest.raises(ValueError) as info:
        LIBRARY_READERS[reader](path)
    assert not osp.exists(marker)
    assert path in str(info.value) and words in str(info.value), info.value


@pytest.mark.parametrize('kind', sorted(CHECKPOINT_PAYLOADS))
def test_checkpoint_meta_reader_never_runs_a_payload(kind, tmp_path):
    """The build-time meta reader (a CLIP tower's recorded activation, the
    LaSt-CLIP and vocabulary records) runs nothing. It used to turn every
    read error into ``{}`` (no records); now it is the one checkpoint
    reader's refusal, naming the file."""
    path, marker, words = _crafted(tmp_path, kind, CHECKPOINT_PAYLOADS,
                                   'x.pth')
    if kind == 'torchscript':  # an archive holds no checkpoint meta
        assert records.read_checkpoint_meta(path) == {}
    else:
        with pytest.raises(ValueError) as info:
            records.read_checkpoint_meta(path)
        assert path in str(info.value), info.value
    assert not osp.exists(marker)


@pytest.mark.parametrize('kind', sorted(ARRAY_PAYLOADS))
def test_array_readers_never_run_a_payload(kind, tmp_path):
    from mmlocat.text import load_query_embeddings
    path, marker, words = _crafted(tmp_path, kind, ARRAY_PAYLOADS, 'emb.npy')
    with open(path[:-len('.npy')] + '.json', 'w') as f:
        json.dump(['cat'], f)
    for read in (load_array, load_query_embeddings):
        with pytest.raises(ValueError) as info:
            read(path)
        assert path in str(info.value) and words in str(info.value)
    assert not osp.exists(marker)


def _tool_argv(tool: str, src: str, tmp_path) -> list:
    """argv of ``tool`` reading ``src`` (the other inputs are valid)."""
    out = str(tmp_path / 'out')
    config = osp.join(REPO, 'configs', 'locat', 'locat-t_8xb128_in1k.py')
    if tool.endswith('2mmlocat'):
        extra = (['--model-config',
                  _tiny_clip_config(tmp_path)]
                 if tool == 'clip2mmlocat' else [])
        return [src, out + '.pth', *extra]
    names = str(tmp_path / 'names.txt')
    with open(names, 'w') as f:
        f.write('cat\ndog\n')
    if tool == 'clipself_embeddings2npy':
        return [src, out + '.npy', '--class-names', names]
    if tool == 'dump_text_embeddings':
        return [
            '--names', names, '--model-config',
            _tiny_clip_config(tmp_path), '--pretrained', src, out + '.npy'
        ]
    if tool == 'test':
        return [config, src, '--work-dir', out]
    if tool == 'infer':
        from PIL import Image
        image = str(tmp_path / 'a.png')
        Image.new('RGB', (32, 32)).save(image)
        return [image, config, src, '--out', out]
    assert tool == 'pytorch2onnx'
    return [config, src, '--out', out + '.onnx']


CONVERTERS = ('locat2mmlocat', 'last_vit2mmlocat', 'clip2mmlocat',
              'eva02_clip2mmlocat', 'dino2mmlocat', 'lastclip2mmlocat',
              'clipself_fvit2mmlocat')
TOOLS = {
    **{
        name: f'tools/model_converters/{name}.py'
        for name in CONVERTERS
    },
    'clipself_embeddings2npy': 'tools/misc/clipself_embeddings2npy.py',
    'dump_text_embeddings': 'tools/misc/dump_text_embeddings.py',
    'test': 'tools/test.py',
    'infer': 'tools/infer.py',
    'pytorch2onnx': 'tools/deployment/pytorch2onnx.py',
}
#: tools that build a model first: the two payloads torch itself would have
#: unpickled (the zip and TorchScript kinds go through the same reader)
_BUILDING_TOOLS = ('test', 'infer', 'pytorch2onnx', 'dump_text_embeddings')


@pytest.mark.parametrize('kind', sorted(CHECKPOINT_PAYLOADS))
@pytest.mark.parametrize('tool', sorted(TOOLS))
def test_every_tool_refuses_a_payload_without_running_it(
        tool, kind, tmp_path, monkeypatch, capsys):
    if tool in _BUILDING_TOOLS and kind in ('torch_zip', 'torchscript'):
        pytest.skip('same reader as the kinds above; the library test '
                    'covers every kind')
    src, marker, words = _crafted(tmp_path, kind, CHECKPOINT_PAYLOADS,
                                  'weights.pth')
    script = osp.join(REPO, TOOLS[tool])
    monkeypatch.setattr(sys, 'argv',
                        [script, *_tool_argv(tool, src, tmp_path)])
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        runpy.run_path(script, run_name='__main__')
    err = capsys.readouterr().err
    assert not osp.exists(marker)
    assert info.value.code == 2, err
    errors = [line for line in err.splitlines() if ': error: ' in line]
    assert len(errors) == 1 and src in errors[0], err
    if kind == 'torchscript' and tool in ('clip2mmlocat',
                                          'dump_text_embeddings'):
        words = 'cannot be read as data'
    assert words in errors[0], err


def test_torchscript_is_read_as_data_equal_to_torch_jit(tmp_path):
    """The tensors of real archives (an open_clip CLIP written as OpenAI
    releases it: traced, fp16, with its int buffers; a scripted fp16
    module with an optional bias and a BatchNorm) equal
    ``torch.jit.load(...).state_dict()``: keys, order, dtypes, values."""
    import open_clip
    from helpers.sources import save_openai_archive
    torch.manual_seed(0)
    archives = [
        save_openai_archive(
            open_clip.CLIP(**tiny_open_clip_cfg()), str(tmp_path / 'clip.pt'))
    ]
    archives.append(str(tmp_path / 'seq.pt'))
    torch.jit.save(
        torch.jit.script(
            torch.nn.Sequential(
                torch.nn.Linear(2, 3), torch.nn.BatchNorm1d(3),
                torch.nn.Linear(3, 2, bias=False)).half()), archives[-1])
    for path in archives:
        expected = torch.jit.load(path).state_dict()
        got = read_torchscript_state_dict(path)
        assert list(got) == list(expected) and len(got) > 5
        for key, value in expected.items():
            assert got[key].dtype == value.dtype, key
            assert torch.equal(got[key], value), key


def test_torchscript_refuses_a_foreign_global(tmp_path):
    path = str(tmp_path / 'ViT-B-16.pt')
    _torchscript(path, str(tmp_path / 'RAN'))
    with pytest.raises(ValueError, match='posix.mkdir.*refusing it'):
        read_torchscript_state_dict(path)
    assert not osp.exists(tmp_path / 'RAN')


# --- the scan: no unsafe load outside mmlocat/utils/safe_load.py ----------
#: the one module allowed to call the loaders below
SAFE_READER = 'mmlocat/utils/safe_load.py'
#: module-level names whose use reads a file that can run code
UNSAFE_NAMES = {('pickle', 'load'), ('pickle', 'loads'),
                ('pickle', 'Unpickler'), ('_pickle', 'load'),
                ('cPickle', 'load'), ('dill', 'load'), ('joblib', 'load'),
                ('marshal', 'load'), ('marshal', 'loads'), ('shelve', 'open'),
                ('jit', 'load'), ('yaml', 'load'), ('yaml', 'unsafe_load'),
                ('yaml', 'full_load'), ('yaml', 'load_all'), ('torch', 'load'),
                ('np', 'load'), ('numpy', 'load')}


def unsafe_loads(source: str, filename: str) -> list:
    """``line: call`` of each unsafe load in ``source``: the names above
    (as attributes or imported names), ``torch.load(weights_only=False)``
    and ``np.load(allow_pickle=True)`` anywhere."""
    found = []
    tree = ast.parse(source, filename)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(
                node.value, (ast.Name, ast.Attribute)):
            owner = (
                node.value.id
                if isinstance(node.value, ast.Name) else node.value.attr)
            if (owner, node.attr) in UNSAFE_NAMES:
                found.append(f'{node.lineno}: {owner}.{node.attr}')
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if (node.module.split('.')[-1], alias.name) in UNSAFE_NAMES:
                    found.append(f'{node.lineno}: from {node.module} '
                                 f'import {alias.name}')
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if (kw.arg in ('weights_only', 'allow_pickle')
                        and isinstance(kw.value, ast.Constant)
                        and kw.value.value is (kw.arg == 'allow_pickle')):
                    found.append(f'{node.lineno}: {kw.arg}='
                                 f'{kw.value.value}')
    return found


def test_the_scan_finds_each_unsafe_form():
    samples = {
        'import pickle\npickle.load(f)': 1,
        'from pickle import Unpickler': 1,
        'torch.load(f, weights_only=False)': 2,
        'np.load(p, allow_pickle=True)': 2,
        'yaml.load(s)': 1,
        'torch.jit.load(p)': 1,
        'yaml.safe_load(s)\njson.load(f)\nnp.save(p, a)': 0,
    }
    for source, count in samples.items():
        assert len(unsafe_loads(source, '<sample>')) == count, source


def test_no_unsafe_load_outside_the_one_reader():
    offenders = []
    for top in ('mmlocat', 'tools'):
        for folder, _, files in os.walk(osp.join(REPO, top)):
            for name in files:
                path = osp.join(folder, name)
                rel = osp.relpath(path, REPO)
                if not name.endswith('.py') or rel == SAFE_READER:
                    continue
                with open(path, encoding='utf-8') as f:
                    offenders += [
                        f'{rel}:{hit}' for hit in unsafe_loads(f.read(), rel)
                    ]
    assert offenders == [], (
        'read untrusted files through mmlocat/utils/safe_load.py '
        '(CONTRIBUTING.md, "Reading files"): ' + '; '.join(offenders))
