"""tools/misc/dump_text_embeddings.py with a stand-in text encoder."""
import importlib.util
import json
import os.path as osp
import sys

import numpy as np
import pytest
import torch

from mmlocat.datasets.text_embeddings import load_text_embeddings


def _tool(repo_root):
    path = osp.join(repo_root, 'tools/misc/dump_text_embeddings.py')
    spec = importlib.util.spec_from_file_location('dump_text_emb', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_writes_embeddings_names_and_base(tmp_path, repo_root, monkeypatch):
    tool = _tool(repo_root)
    ann = tmp_path / 'ann.json'
    ann.write_text(
        json.dumps(
            dict(categories=[
                dict(id=2, name='dog', split='novel'),
                dict(id=1, name='cat', split='base')
            ])))

    def fake_encoder(model, pretrained, device):
        assert (model, pretrained) == ('ViT-B-16', 'w.pt')
        gen = torch.Generator().manual_seed(0)
        table = torch.randn(64, 6, generator=gen)
        return lambda prompts: torch.stack(
            [table[[ord(c) % 64 for c in p]].sum(0) for p in prompts])

    monkeypatch.setattr(tool, 'open_clip_encoder', fake_encoder)
    out = str(tmp_path / 'emb' / 'x.npy')
    monkeypatch.setattr(sys, 'argv', [
        'dump', '--ann-file',
        str(ann), '--pretrained', 'w.pt', '--background', out
    ])
    tool.main()
    emb, bg, names = load_text_embeddings(out, ['cat', 'dog'])
    assert names == ['cat', 'dog'] and emb.shape == (2, 6)
    assert bg is not None
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1, rtol=1e-5)
    base = json.load(open(str(tmp_path / 'emb' / 'x.base.json')))
    assert base == ['cat']


def test_needs_open_clip(repo_root, monkeypatch):
    tool = _tool(repo_root)
    monkeypatch.setitem(sys.modules, 'open_clip', None)
    with pytest.raises(ImportError, match='open_clip'):
        tool.open_clip_encoder('ViT-B-16', 'w.pt', 'cpu')


def _fvit_prompts_by_hand(name):
    """F-ViT's prompts for a lower-case name without '/' or trailing dots,
    spelled out from CLIPSelf's build_text_embedding_openclip."""
    from mmlocat.datasets.text_embeddings import FVIT_TEMPLATES
    text = name.replace('_', ' ')
    article = 'an' if name[0] in 'aeiou' else 'a'
    prompts = [t.format(text, article=article) for t in FVIT_TEMPLATES]
    return [('This is ' + p) if p[0] == 'a' or p.startswith('the') else p
            for p in prompts]


def test_real_open_clip_text_tower(tmp_path, repo_root, monkeypatch):
    """A random-init open_clip ViT-B-16 saved as a user's file: the tool's
    embeddings are open_clip's own encode_text averaged over F-ViT's
    prompts."""
    import open_clip

    from mmlocat.utils.provenance import file_sha256
    torch.manual_seed(0)
    model = open_clip.create_model('ViT-B-16', pretrained=None).eval()
    weights = str(tmp_path / 'ViT-B-16.bin')
    torch.save(model.state_dict(), weights)
    names = tmp_path / 'names.txt'
    # One class: 63 prompts through a B/16 text tower take ~10 s on a
    # loaded CPU core, once in the tool and once for the reference.
    names.write_text('aerosol_can\n')
    out = str(tmp_path / 'emb.npy')
    monkeypatch.setattr(sys, 'argv', [
        'dump', '--names',
        str(names), '--model', 'ViT-B-16', '--pretrained', weights, out
    ])
    _tool(repo_root).main()
    emb, bg, rows = load_text_embeddings(out)
    assert rows == ['aerosol_can'] and bg is None
    tokenizer = open_clip.get_tokenizer('ViT-B-16')
    prompts = _fvit_prompts_by_hand('aerosol_can')
    assert prompts[0] == 'There is an aerosol can in the scene.'
    assert prompts[8] == 'This is a photo of an aerosol can.'
    for row, name in zip(emb, rows):
        with torch.no_grad():
            feats = model.encode_text(tokenizer(_fvit_prompts_by_hand(name)))
        feats = feats / feats.norm(dim=-1, keepdim=True)
        ref = feats.mean(0)
        ref = (ref / ref.norm()).numpy()
        np.testing.assert_allclose(row, ref, atol=1e-5, rtol=0)
    side = json.load(open(out[:-4] + '.json'))
    assert side['text_model'] == dict(
        name='ViT-B-16',
        weights='ViT-B-16.bin',
        sha256=file_sha256(weights),
        templates='fvit',
        prompt_style='fvit')
