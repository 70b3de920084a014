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
