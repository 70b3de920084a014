"""mmlocat.text.cache: run-time vocabulary embeddings, built once and kept
on disk keyed by everything the rows depend on."""
import pytest
import torch

from mmlocat.text import load_text_embeddings, vocabulary_embeddings


def test_vocabulary_embeddings_cache(tmp_path):
    calls = []
    gen = torch.Generator().manual_seed(0)
    table = torch.randn(128, 8, generator=gen)

    def encoder(prompts):
        calls.append(len(prompts))
        return torch.stack(
            [table[[ord(c) % 128 for c in p]].sum(0) for p in prompts])

    kwargs = dict(cache_dir=str(tmp_path), encoder=encoder)
    path = vocabulary_embeddings(['cat', 'dog'], 'm', 'tag', **kwargs)
    assert len(calls) == 3  # cat, dog, background
    emb, bg, names = load_text_embeddings(path, ['cat', 'dog'])
    assert emb.shape == (2, 8) and bg is not None
    assert vocabulary_embeddings(['cat', 'dog'], 'm', 'tag', **kwargs) == path
    assert len(calls) == 3  # cached
    # other names, order, model, templates: other files
    others = {
        vocabulary_embeddings(['dog', 'cat'], 'm', 'tag', **kwargs),
        vocabulary_embeddings(['cat', 'dog'], 'n', 'tag', **kwargs),
        vocabulary_embeddings(['cat', 'dog'],
                              'm',
                              'tag',
                              templates='single',
                              **kwargs)
    }
    assert len(others) == 3 and path not in others
    assert not list(tmp_path.glob('*.tmp.*'))
    with pytest.raises(ValueError, match='templates must be one of'):
        vocabulary_embeddings(['cat'], 'm', 'tag', templates='x')
