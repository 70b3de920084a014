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


def test_templates_edited_under_their_name_miss_the_cache(
        tmp_path, monkeypatch):
    """The key holds the templates' content, not only the set's name: rows
    of edited templates are never served from the old entry."""
    from mmlocat.text import templates
    calls = []

    def encoder(prompts):
        calls.append(list(prompts))
        return torch.ones(len(prompts), 4)

    kwargs = dict(cache_dir=str(tmp_path), encoder=encoder, templates='single')
    first = vocabulary_embeddings(['cat'], 'm', 'tag', **kwargs)
    built = len(calls)
    assert templates.TEMPLATE_SETS['single'] != ('a photo of {}.', )
    # the one dict every module reads, edited in place
    monkeypatch.setitem(templates.TEMPLATE_SETS, 'single',
                        ('a photo of {}.', ))
    second = vocabulary_embeddings(['cat'], 'm', 'tag', **kwargs)
    assert second != first
    # encoded again, with the edited template
    assert ['This is a photo of cat.'] in calls[built:], calls
