"""CLIP release files at random init through the converters and the text
embedding tool: OpenAI's TorchScript archive, open_clip state dicts
(LAION-style exact-GELU ViT-B-16, MetaCLIP-style QuickGELU), the EVA repo's
EVA-CLIP ``.pt`` and open_clip's EVA02 ``.bin``.

An image tower and text embeddings are accepted as the same CLIP exactly
when their text towers are the same tensors (the ``text_sha256``
fingerprint), whichever files they were read from; one changed text value,
or the same weights run with the other activation, is refused.
"""
import json
import os.path as osp

import numpy as np
import pytest
import torch
from helpers import sources
from helpers.harness import run_tool

from mmlocat.text import load_text_embeddings, read_text_model
from mmlocat.utils.records import (check_clip_pairing,
                                   checkpoint_weights_sha256, file_sha256,
                                   file_text_sha256, read_checkpoint_meta,
                                   text_sha256)


def _paired(text_model, emb, image):
    """The one pairing rule of the models (F-ViT, the zero-shot
    segmentor) on a dumped file and a converted tower."""
    check_clip_pairing(text_model, emb, image, 'FViT', 'check_clip=False')


TOOLS = dict(
    dump='tools/misc/dump_text_embeddings.py',
    clip='tools/model_converters/clip2mmlocat.py',
    eva='tools/model_converters/eva02_clip2mmlocat.py')


def _model_config(folder, name):
    """open_clip's config of ``name`` at the tiny width, as the JSON
    ``--model-config`` registers (the file stem is the model name)."""
    path = folder / f'tiny-{name}.json'
    path.write_text(json.dumps(sources.tiny_open_clip_config(name)))
    return path


def _dump(tmp_path, model_config, weights, out):
    names = tmp_path / 'names.txt'
    names.write_text('cat\nremote control\n')
    proc = run_tool(TOOLS['dump'], '--names', names, '--model-config',
                    model_config, '--pretrained', weights, '--templates',
                    'single', tmp_path / out)
    assert proc.returncode == 0, proc.stderr
    return str(tmp_path / out)


def _perturbed(state_dict, path, key):
    """``state_dict`` with one value of the text tensor ``key`` changed."""
    changed = dict(state_dict)
    changed[key] = changed[key].clone()
    changed[key].view(-1)[0] += 1e-3
    torch.save(changed, str(path))
    return str(path)


def test_openai_archive_and_its_open_clip_copy(tmp_path):
    model = sources.openai_clip_model('ViT-B-16-quickgelu', seed=0)
    archive = sources.save_openai_archive(model, str(tmp_path / 'ViT-B-16.pt'))
    copy = tmp_path / 'openai_copy'
    copy.mkdir()
    bin_file = str(copy / 'open_clip_pytorch_model.bin')
    torch.save(model.state_dict(), bin_file)
    assert file_sha256(archive) != file_sha256(bin_file)
    fingerprint = text_sha256(model.state_dict())
    quick = _model_config(tmp_path, 'ViT-B-16-quickgelu')
    gelu = _model_config(tmp_path, 'ViT-B-16')

    # image tower from the archive, text from either file: one CLIP
    image = str(tmp_path / 'clip-vit-b16_mmlocat.pth')
    proc = run_tool(TOOLS['clip'], archive, image, '--model-config', quick)
    assert proc.returncode == 0, proc.stderr
    record = read_checkpoint_meta(image)['clip']
    # the record is bound to the tower's own weights (issue 34)
    assert record.pop('image_sha256') == checkpoint_weights_sha256(image)
    assert record == dict(
        name='tiny-ViT-B-16-quickgelu',
        weights='ViT-B-16.pt',
        sha256=file_sha256(archive),
        act='quick_gelu',
        text_sha256=fingerprint,
        text_act='quick_gelu')
    from_bin = _dump(tmp_path, quick, bin_file, 'bin.npy')
    from_archive = _dump(tmp_path, quick, archive, 'archive.npy')
    for emb in (from_bin, from_archive):
        assert read_text_model(emb)['text_sha256'] == fingerprint
        assert read_text_model(emb)['text_act'] == 'quick_gelu'
        _paired(read_text_model(emb), emb, image)
    # the same tower: the same embeddings
    np.testing.assert_allclose(
        load_text_embeddings(from_bin)[0],
        load_text_embeddings(from_archive)[0],
        rtol=0,
        atol=1e-6)

    # one text value changed: another CLIP, refused naming both
    other = _perturbed(model.state_dict(), tmp_path / 'changed.bin',
                       'transformer.resblocks.0.attn.in_proj_weight')
    emb = _dump(tmp_path, quick, other, 'changed.npy')
    assert read_text_model(emb)['text_sha256'] == file_text_sha256(other)
    assert file_text_sha256(other) != fingerprint
    with pytest.raises(ValueError) as err:
        _paired(read_text_model(emb), emb, image)
    assert (f'come from the CLIP text tower {file_text_sha256(other)} '
            f'(changed.bin sha256 {file_sha256(other)}) but the backbone '
            f'checkpoint {image} from the CLIP text tower {fingerprint} '
            f'(ViT-B-16.pt sha256 {file_sha256(archive)})') in str(err.value)

    # an archive is a QuickGELU CLIP: exact GELU refused by both tools
    for tool, args in (('dump', ('--names', tmp_path / 'names.txt',
                                 '--model-config', gelu, '--pretrained',
                                 archive, tmp_path / 'gelu.npy')),
                       ('clip',
                        (archive, tmp_path / 'gelu.pth', '--model-config',
                         gelu)), ('clip', (archive, tmp_path / 'gelu.pth',
                                           '--act', 'gelu'))):
        proc = run_tool(TOOLS[tool], *args)
        assert proc.returncode == 2, proc.stderr
        assert (f'{archive} is a TorchScript archive, i.e. an OpenAI CLIP '
                'release, and OpenAI CLIP uses QuickGELU') in proc.stderr
        assert "uses 'gelu'" in proc.stderr
        assert not osp.exists(tmp_path / 'gelu.npy')
        assert not osp.exists(tmp_path / 'gelu.pth')


def test_eva_repo_file_and_open_clip_file_of_one_model(tmp_path):
    eva_file = str(tmp_path / 'EVA02_CLIP_B_psz16_s8B.pt')
    torch.save(sources.eva_clip_state_dict('EVA02-B-16', seed=1), eva_file)
    open_clip_state = sources.open_clip_state_dict('EVA02-B-16', seed=1)
    bin_file = str(tmp_path / 'open_clip_EVA02-B-16.bin')
    torch.save(open_clip_state, bin_file)
    fingerprint = text_sha256(open_clip_state)
    config = _model_config(tmp_path, 'EVA02-B-16')
    towers = {}
    for src in (eva_file, bin_file):
        towers[src] = str(tmp_path / (osp.basename(src) + '.pth'))
        proc = run_tool(TOOLS['eva'], src, towers[src], '--model-config',
                        config)
        assert proc.returncode == 0, proc.stderr
        record = read_checkpoint_meta(towers[src])['clip']
        assert record['text_sha256'] == fingerprint
        assert record['text_act'] == 'gelu'
        assert record['image_sha256'] == checkpoint_weights_sha256(towers[src])
    # two files of one model: the same image tower ...
    a, b = (torch.load(p)['state_dict'] for p in towers.values())
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    # ... and the same text tower: open_clip's EVA02-B-16 reads the EVA
    # repo's text.* keys
    emb_bin = _dump(tmp_path, config, bin_file, 'bin.npy')
    emb_eva = _dump(tmp_path, config, eva_file, 'eva.npy')
    np.testing.assert_allclose(
        load_text_embeddings(emb_bin)[0],
        load_text_embeddings(emb_eva)[0],
        rtol=0,
        atol=1e-6)
    # the README's pair: tower from the EVA repo's file, text from
    # open_clip's (file hashes differ, text towers do not)
    _paired(read_text_model(emb_bin), emb_bin, towers[eva_file])
    _paired(read_text_model(emb_eva), emb_eva, towers[bin_file])
    other = _perturbed(open_clip_state, tmp_path / 'changed.bin',
                       'text.ln_final.weight')
    emb = _dump(tmp_path, config, other, 'changed.npy')
    with pytest.raises(ValueError, match='the text towers differ'):
        _paired(read_text_model(emb), emb, towers[eva_file])


def test_open_clip_files_need_their_activation_named(tmp_path):
    """LAION's ViT-B-16 (exact GELU) and MetaCLIP's ViT-B-16-quickgelu are
    the same layout: nothing in the file tells them apart, so the model
    name says it; two records naming other activations for one text tower
    are refused."""
    laion = str(tmp_path / 'open_clip_pytorch_model.bin')
    torch.save(sources.open_clip_state_dict('ViT-B-16', seed=2), laion)
    gelu = _model_config(tmp_path, 'ViT-B-16')
    quick = _model_config(tmp_path, 'ViT-B-16-quickgelu')
    emb = _dump(tmp_path, gelu, laion, 'laion.npy')
    assert read_text_model(emb)['text_act'] == 'gelu'
    right, wrong = (str(tmp_path / n) for n in ('right.pth', 'wrong.pth'))
    for dst, config in ((right, gelu), (wrong, quick)):
        proc = run_tool(TOOLS['clip'], laion, dst, '--model-config', config)
        assert proc.returncode == 0, proc.stderr
    _paired(read_text_model(emb), emb, right)
    with pytest.raises(
            ValueError,
            match=r"encoded with text activation 'gelu' \(open_clip model "
            r"'tiny-ViT-B-16'\) but the backbone checkpoint .*wrong\.pth "
            r"records 'quick_gelu' \(open_clip model "
            r"'tiny-ViT-B-16-quickgelu'\)"):
        _paired(read_text_model(emb), emb, wrong)


@pytest.mark.e2e
def test_dump_reads_an_openai_archive_in_a_fresh_process(tmp_path):
    """The command of configs/ovd/README.md "Text embeddings" on OpenAI's
    TorchScript release (a tiny one: --model-config names its config)
    stopped at torch.load's weights-only check."""
    archive = sources.save_openai_archive(
        sources.openai_clip_model(seed=4), str(tmp_path / 'ViT-B-16.pt'))
    names = tmp_path / 'names.txt'
    names.write_text('cat\n')
    out = str(tmp_path / 'ov-coco_clip-vit-b16.npy')
    proc = run_tool(
        TOOLS['dump'],
        '--background',
        '--names',
        names,
        '--model-config',
        _model_config(tmp_path, 'ViT-B-16-quickgelu'),
        '--pretrained',
        archive,
        out,
        isolate='torch.load\'s weights-only allow-list is process state '
        'that other tests extend: only a fresh process shows the default')
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert 'weights_only' not in proc.stderr
    assert read_text_model(out)['text_sha256'] == file_text_sha256(archive)


def test_open_clip_reads_the_archive_as_openai_releases():
    """open_clip's loader of OpenAI's archives (``load_openai_model``, the
    transcription of ``clip.load(..., jit=False)``: ``build_model`` from the
    archive's state dict, loaded strictly) reads the archive, whose weights
    are the float32 model's. It infers heads as width // 64: 64-wide
    towers with its MLP ratio 4 here."""
    import copy
    import tempfile

    import open_clip
    cfg = copy.deepcopy(sources.tiny_open_clip_config('ViT-B-16-quickgelu'))
    cfg['vision_cfg'].update(width=64, head_width=64, layers=2, mlp_ratio=4)
    cfg['text_cfg'].update(width=64, heads=1, layers=2)
    model = sources.openai_clip_model(model_cfg=cfg, seed=5)
    with tempfile.TemporaryDirectory() as tmp:
        path = sources.save_openai_archive(model, osp.join(tmp, 'ViT.pt'))
        archive = torch.jit.load(path, map_location='cpu')
        loaded = open_clip.openai.load_openai_model(path, device='cpu')
    assert sorted(k for k in archive.state_dict()
                  if not k.startswith(('visual.', 'transformer.'))) == [
                      'context_length', 'input_resolution', 'ln_final.bias',
                      'ln_final.weight', 'logit_scale', 'positional_embedding',
                      'text_projection', 'token_embedding.weight', 'vocab_size'
                  ]
    # OpenAI's storage: float16 weights (LayerNorms and embeddings float32)
    stored = archive.state_dict()
    assert stored['transformer.resblocks.0.mlp.c_fc.weight'].dtype == \
        torch.float16
    assert stored['ln_final.weight'].dtype == torch.float32
    ours = model.state_dict()
    theirs = loaded.state_dict()
    assert ours.keys() == theirs.keys()
    assert all(torch.equal(ours[k], theirs[k].float()) for k in ours)
