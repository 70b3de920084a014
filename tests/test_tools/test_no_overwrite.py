"""No tool writes over its own input (issue 33).

Every converter, ``pytorch2onnx.py``, ``dump_text_embeddings.py`` and
``clipself_embeddings2npy.py`` is given an output path that is one of its
inputs (the same path, or a symlink to it) and must end with one line
``NAME: error: ...`` naming both files, exit status 2, before reading
anything: the input is byte-identical afterwards. The converter sources
are real (tiny random-init releases), so without the guard the run would
succeed and replace them.
"""
import hashlib
import json
import os
import os.path as osp

import pytest
import torch
from helpers.harness import run_tool
from helpers.sources import (dino_training_checkpoint, eva_clip_state_dict,
                             open_clip_state_dict, timm_vit_state_dict,
                             torchvision_vit_state_dict)

CLASSES = ['cat', 'dog']


def _sha256(path: str) -> str:
    with open(path, 'rb') as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.fixture(scope='module')
def sources(tmp_path_factory) -> dict:
    """``{converter: source file}``: what each converter reads, real."""
    tmp = tmp_path_factory.mktemp('sources')
    made = dict(
        locat2mmlocat=timm_vit_state_dict('deit_tiny_patch16_224'),
        last_vit2mmlocat=torchvision_vit_state_dict(),
        dino2mmlocat=dino_training_checkpoint(),
        clip2mmlocat=open_clip_state_dict('ViT-B-16'),
        eva02_clip2mmlocat=eva_clip_state_dict(),
        # read only by their tools' own checks: any checkpoint will do,
        # the guard refuses before reading
        lastclip2mmlocat={'w': torch.ones(2)},
        clipself_fvit2mmlocat={'w': torch.ones(2)})
    files = {}
    for name, obj in made.items():
        files[name] = str(tmp / f'{name}_src.pth')
        torch.save(obj, files[name])
    return files


def _refused(code, err, name: str, out: str, src: str) -> None:
    """Exit 2 and one line naming the output and the input it is."""
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f'{name}: error: '), err
    assert f' {out} ' in lines[0] and 'is the input ' in lines[0], err
    assert f' {src}: writing it would destroy the input; choose another ' \
        in lines[0], err


def _text_tool_refused(tool, argv, inputs, out, src, option) -> None:
    """``tools/misc/TOOL ARGV`` refuses ``out`` as the input ``option``
    ``src`` (:func:`_refused`) and leaves every file of ``inputs`` as it
    was."""
    before = {p: _sha256(p) for p in inputs.values()}
    proc = run_tool(f'tools/misc/{tool}', *argv)
    _refused(proc.returncode, proc.stderr, tool[:-3], out, src)
    assert f'is the input {option} {src}' in proc.stderr
    assert {p: _sha256(p) for p in inputs.values()} == before


def _output(tmp_path, src: str, how: str, name: str = 'out.pth') -> str:
    """The input itself, or a symlink to it."""
    if how == 'same':
        return src
    link = str(tmp_path / name)
    os.symlink(src, link)
    return link


CONVERTER_ARGS = dict(clip2mmlocat=['--act', 'quick_gelu'])


@pytest.mark.parametrize('how', ['same', 'symlink'])
@pytest.mark.parametrize('converter', [
    'locat2mmlocat', 'last_vit2mmlocat', 'dino2mmlocat', 'clip2mmlocat',
    'eva02_clip2mmlocat', 'lastclip2mmlocat', 'clipself_fvit2mmlocat'
])
def test_converter_refuses_to_write_over_its_source(converter, how, sources,
                                                    tmp_path):
    src = sources[converter]
    before = _sha256(src)
    dst = _output(tmp_path, src, how)
    proc = run_tool(f'tools/model_converters/{converter}.py', src, dst,
                    *CONVERTER_ARGS.get(converter, []))
    code, err = proc.returncode, proc.stderr
    _refused(code, err, converter, dst, src)
    assert f'DST {dst}' in err and f'SRC {src}' in err
    assert _sha256(src) == before


def test_lastclip_text_out_over_the_source(sources, tmp_path):
    src = sources['lastclip2mmlocat']
    before = _sha256(src)
    proc = run_tool('tools/model_converters/lastclip2mmlocat.py', src,
                    tmp_path / 'out.pth', '--text-out', src)
    code, err = proc.returncode, proc.stderr
    _refused(code, err, 'lastclip2mmlocat', src, src)
    assert f'--text-out {src} is the input SRC {src}' in err
    assert _sha256(src) == before and not osp.exists(tmp_path / 'out.pth')


@pytest.mark.parametrize('target', ['checkpoint', 'config', 'symlink'])
def test_onnx_export_refuses_out_over_its_inputs(target, tmp_path):
    config = str(tmp_path / 'cfg.py')
    with open(config, 'w') as f:
        f.write("model = dict(type='mmlocat.LocAtViT')\n")
    ckpt = str(tmp_path / 'trained.pth')
    torch.save(dict(state_dict={'w': torch.ones(2)}), ckpt)
    before = {p: _sha256(p) for p in (config, ckpt)}
    src = config if target == 'config' else ckpt
    out = _output(tmp_path, src, 'symlink' if target == 'symlink' else 'same',
                  'model.onnx')
    proc = run_tool('tools/deployment/pytorch2onnx.py', config, ckpt, '--out',
                    out)
    code, err = proc.returncode, proc.stderr
    _refused(code, err, 'pytorch2onnx.py', out, src)
    assert f'--out {out}' in err
    assert ('CONFIG' if target == 'config' else 'CHECKPOINT') in err
    assert {p: _sha256(p) for p in (config, ckpt)} == before


@pytest.fixture
def text_inputs(tmp_path) -> dict:
    names = tmp_path / 'classes.json'
    names.write_text(json.dumps(CLASSES))
    ann = tmp_path / 'instances.json'
    ann.write_text(
        json.dumps(
            dict(categories=[
                dict(id=1, name='cat', split='base'),
                dict(id=2, name='dog', split='novel')
            ])))
    weights = tmp_path / 'text_weights.pt'
    torch.save({'w': torch.ones(2)}, str(weights))
    emb = tmp_path / 'clipself.pt'
    torch.save({n: torch.ones(4) for n in CLASSES + ['background']}, str(emb))
    return dict(
        names=str(names), ann=str(ann), weights=str(weights), emb=str(emb))


@pytest.mark.parametrize(
    'case', ['names_sidecar', 'ann_sidecar', 'pretrained_symlink'])
def test_dump_text_embeddings_refuses_out_over_an_input(
        case, text_inputs, tmp_path):
    tmp = str(tmp_path)
    if case == 'names_sidecar':  # OUT.json is the --names file
        src, option = text_inputs['names'], '--names'
        argv = [
            '--names', src, '--pretrained', text_inputs['weights'],
            osp.join(tmp, 'classes.npy')
        ]
        out = src
    elif case == 'ann_sidecar':  # OUT.json is the --ann-file
        src, option = text_inputs['ann'], '--ann-file'
        argv = [
            '--ann-file', src, '--pretrained', text_inputs['weights'],
            osp.join(tmp, 'instances.npy')
        ]
        out = src
    else:  # OUT is a symlink to the weights
        src, option = text_inputs['weights'], '--pretrained'
        out = _output(tmp_path, src, 'symlink', 'emb.npy')
        argv = ['--names', text_inputs['names'], '--pretrained', src, out]
    _text_tool_refused('dump_text_embeddings.py', argv, text_inputs, out, src,
                       option)


@pytest.mark.parametrize('case',
                         ['src_symlink', 'class_names_sidecar', 'ann_base'])
def test_clipself_embeddings2npy_refuses_out_over_an_input(
        case, text_inputs, tmp_path):
    emb, names = text_inputs['emb'], text_inputs['names']
    if case == 'src_symlink':  # np.save would follow the link
        src, option = emb, 'SRC'
        out = _output(tmp_path, src, 'symlink', 'rows.npy')
        argv = [emb, out, '--class-names', names]
    elif case == 'class_names_sidecar':  # OUT.json is --class-names
        src = out = names
        option = '--class-names'
        argv = [emb, str(tmp_path / 'classes.npy'), '--class-names', names]
    else:  # OUT.base.json is the --ann-file
        src = out = str(tmp_path / 'rows.base.json')
        os.rename(text_inputs['ann'], src)
        text_inputs['ann'] = src
        option = '--ann-file'
        argv = [
            emb,
            str(tmp_path / 'rows.npy'), '--class-names', names, '--ann-file',
            src
        ]
    _text_tool_refused('clipself_embeddings2npy.py', argv, text_inputs, out,
                       src, option)
