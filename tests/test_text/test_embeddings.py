"""mmlocat.text.embeddings: prompt ensembling, files, validation against
classes."""
import json

import numpy as np
import pytest
import torch

from mmlocat import text as te
from mmlocat.utils.records import (check_prompt_recipe, rows_sha256,
                                   templates_sha256)

PROMPT_TEMPLATES = te.PROMPT_TEMPLATES
CLIP_TEMPLATES = te.CLIP_TEMPLATES
build_class_embeddings = te.build_class_embeddings
load_text_embeddings = te.load_text_embeddings
save_text_embeddings = te.save_text_embeddings
sidecar_path = te.sidecar_path


class CharEncoder:
    """A small deterministic text encoder: a fixed random projection of
    character counts (stands in for CLIP's text tower)."""

    def __init__(self, dim=8):
        self.weight = torch.randn(
            128, dim, generator=torch.Generator().manual_seed(0))
        self.calls = []

    def __call__(self, prompts):
        self.calls.append(list(prompts))
        counts = torch.zeros(len(prompts), 128)
        for i, p in enumerate(prompts):
            for ch in p:
                counts[i, ord(ch) % 128] += 1
        return counts @ self.weight


def test_build_matches_hand_computation():
    enc = CharEncoder()
    emb, names = build_class_embeddings(['trash_can', 'cat'],
                                        enc,
                                        background=True)
    assert names == ['trash_can', 'cat', 'background']
    assert emb.shape == (3, 8) and emb.dtype == np.float32
    assert enc.calls[0][8] == 'This is a photo of a trash can.'
    for row, name in zip(emb, ['trash_can', 'cat', 'background']):
        feats = enc(te.fvit_prompts(name, PROMPT_TEMPLATES)).numpy()
        feats /= np.linalg.norm(feats, axis=1, keepdims=True)
        ref = feats.mean(0)
        np.testing.assert_allclose(row, ref / np.linalg.norm(ref), atol=1e-5)
    with pytest.raises(ValueError, match='duplicates'):
        build_class_embeddings(['a', 'a'], enc)
    with pytest.raises(ValueError, match='exactly one'):
        build_class_embeddings(['a'], enc, templates=['no slot'])
    with pytest.raises(ValueError, match='prompt_style must be one of'):
        build_class_embeddings(['a'], enc, prompt_style='vild')


def test_plain_style_with_clip_templates():
    enc = CharEncoder()
    emb, _ = build_class_embeddings(['trash_can'],
                                    enc,
                                    templates=CLIP_TEMPLATES,
                                    prompt_style='plain')
    assert enc.calls[0][CLIP_TEMPLATES.index('a photo of a {}.')] == \
        'a photo of a trash can.'
    feats = enc([t.format('trash can') for t in CLIP_TEMPLATES]).numpy()
    feats /= np.linalg.norm(feats, axis=1, keepdims=True)
    ref = feats.mean(0)
    np.testing.assert_allclose(emb[0], ref / np.linalg.norm(ref), atol=1e-5)


def _save(tmp_path, names, rows=None, name='e.npy'):
    rows = len(names) if rows is None else rows
    emb = np.random.RandomState(0).randn(rows, 4).astype(np.float32)
    return save_text_embeddings(str(tmp_path / name), emb, names), emb


def test_round_trip_and_background(tmp_path):
    path, raw = _save(tmp_path, ['a', 'b', 'background'])
    # one shape, with or without a text_model record (issue 34)
    assert json.load(open(
        sidecar_path(path))) == dict(classes=['a', 'b', 'background'])
    emb, bg, names = load_text_embeddings(path, ['a', 'b'])
    assert names == ['a', 'b'] and emb.shape == (2, 4)
    np.testing.assert_allclose(
        emb,
        raw[:2] / np.linalg.norm(raw[:2], axis=1, keepdims=True),
        rtol=1e-6)
    np.testing.assert_allclose(bg, raw[2] / np.linalg.norm(raw[2]), rtol=1e-6)
    emb, bg, _ = load_text_embeddings(
        _save(tmp_path, ['a', 'b'], name='n.npy')[0])
    assert bg is None and emb.shape == (2, 4)
    assert te.read_text_model(path) == {}


def test_sidecar_records_the_text_model(tmp_path):
    record = dict(name='ViT-B-16', weights='w.bin', sha256='ab' * 32)
    path = save_text_embeddings(
        str(tmp_path / 't.npy'),
        np.eye(3, 4, dtype=np.float32), ['a', 'b', 'background'],
        text_model=record)
    # the record, bound to these rows by their fingerprint (issue 34)
    rows = rows_sha256(np.eye(3, 4, dtype=np.float32))
    assert json.load(open(sidecar_path(path))) == dict(
        classes=['a', 'b', 'background'],
        text_model=dict(record, rows_sha256=rows))
    assert te.read_text_model(path) == dict(record, rows_sha256=rows)
    emb, bg, names = load_text_embeddings(path, ['a', 'b'])
    assert names == ['a', 'b'] and bg is not None
    assert te.read_class_names(sidecar_path(path)) == ['a', 'b', 'background']


@pytest.mark.parametrize('file_names, match', [
    (['b', 'a', 'c'], "different order \\(first difference at row 0: 'b'"),
    (['a', 'b', 'x'], "missing \\['c'\\], unexpected \\['x'\\]"),
    (['a', 'b'], 'lists 2 classes, the dataset 3'),
])
def test_mismatch_is_refused(tmp_path, file_names, match):
    path, _ = _save(tmp_path, file_names)
    with pytest.raises(ValueError, match=match):
        load_text_embeddings(path, ['a', 'b', 'c'])


def test_bad_files(tmp_path):
    path, _ = _save(tmp_path, ['a', 'b'])
    with open(sidecar_path(path), 'w') as f:
        json.dump(['a', 'b', 'c'], f)
    with pytest.raises(ValueError, match='lists 3 names'):
        load_text_embeddings(path)
    nan = np.ones((2, 4), np.float32)
    nan[1, 2] = np.nan
    path = save_text_embeddings(str(tmp_path / 'nan.npy'), nan, ['a', 'b'])
    with pytest.raises(ValueError, match='NaN'):
        load_text_embeddings(path)
    with pytest.raises(FileNotFoundError):
        load_text_embeddings(str(tmp_path / 'none.npy'))
    with pytest.raises(ValueError, match='.npy'):
        sidecar_path('x.pt')


def test_query_embeddings_round_trip(tmp_path):
    """One row per name, the sidecar maps rows to classes; a name shared by
    two classes gets the same row twice (SCLIP encodes it twice)."""
    enc = CharEncoder()
    lines = [['sky', 'bed'], ['cat'], ['bed']]
    emb, queries, query_class = te.build_query_embeddings(
        lines, enc, te.IMAGENET_TEMPLATES, 'plain')
    assert queries == ['sky', 'bed', 'cat', 'bed']
    assert query_class == [0, 0, 1, 2]
    assert len(enc.calls) == 3  # 'bed' encoded once
    np.testing.assert_array_equal(emb[1], emb[3])
    ref, _ = build_class_embeddings(['sky', 'bed', 'cat'],
                                    CharEncoder(),
                                    templates=te.IMAGENET_TEMPLATES,
                                    prompt_style='plain')
    np.testing.assert_allclose(emb[:3], ref, rtol=1e-6)
    classes = ['background', 'cat', 'bed']
    path = save_text_embeddings(
        str(tmp_path / 'q.npy'),
        emb,
        queries,
        text_model=dict(templates='imagenet80'),
        query_class=query_class,
        classes=classes)
    assert json.load(open(sidecar_path(path))) == dict(
        classes=classes,
        queries=queries,
        query_class=query_class,
        text_model=dict(templates='imagenet80', rows_sha256=rows_sha256(emb)))
    table = te.load_query_embeddings(path, classes)
    assert table.classes == classes and table.queries == queries
    assert table.query_class == query_class and table.has_query_map
    np.testing.assert_allclose(table.embeddings, emb, rtol=1e-6)
    assert te.read_class_names(sidecar_path(path)) == classes
    with pytest.raises(ValueError, match='different order'):
        te.load_query_embeddings(path, ['background', 'bed', 'cat'])
    # one-row-per-class consumers (F-ViT) refuse it
    with pytest.raises(ValueError, match='4 query rows for 3 classes'):
        load_text_embeddings(path)


def test_old_sidecars_read_as_one_row_per_class(tmp_path):
    path, raw = _save(tmp_path, ['a', 'b'])
    table = te.load_query_embeddings(path)
    assert table.queries == table.classes == ['a', 'b']
    assert table.query_class == [0, 1] and not table.has_query_map
    # an identity map is one row per class for every consumer
    path = save_text_embeddings(
        str(tmp_path / 'id.npy'),
        raw, ['x', 'y'],
        query_class=[0, 1],
        classes=['a', 'b'])
    assert load_text_embeddings(path, ['a', 'b'])[2] == ['a', 'b']


def test_bad_query_maps(tmp_path):
    emb = np.eye(3, 4, dtype=np.float32)
    with pytest.raises(ValueError, match=r'classes \[1\] have no query row'):
        save_text_embeddings(
            str(tmp_path / 'a.npy'),
            emb, ['x', 'y', 'z'],
            query_class=[0, 0, 2],
            classes=['a', 'b', 'c'])
    with pytest.raises(ValueError, match='not class indices'):
        save_text_embeddings(
            str(tmp_path / 'a.npy'),
            emb, ['x', 'y', 'z'],
            query_class=[0, 1, 3],
            classes=['a', 'b', 'c'])
    with pytest.raises(ValueError, match='go together'):
        save_text_embeddings(
            str(tmp_path / 'a.npy'), emb, ['x', 'y', 'z'], query_class=[0])
    path = save_text_embeddings(
        str(tmp_path / 'b.npy'),
        emb, ['x', 'y', 'z'],
        query_class=[0, 1, 1],
        classes=['a', 'b'])
    side = json.load(open(sidecar_path(path)))
    side.pop('query_class')
    json.dump(side, open(sidecar_path(path), 'w'))
    with pytest.raises(ValueError, match='both "queries" and "query_class"'):
        te.load_query_embeddings(path)
    side.update(query_class=[0, 1])
    json.dump(side, open(sidecar_path(path), 'w'))
    with pytest.raises(ValueError, match='2 query_class entries for 3 rows'):
        te.load_query_embeddings(path)


def test_write_text_embeddings_is_build_then_save(tmp_path):
    """The one build-and-save step writes what building and saving by hand
    write, byte for byte, in its three row layouts; nothing else is left."""
    record = dict(name='m', weights='w.pt')
    single = te.TEMPLATE_SETS['single']
    # the set's content is recorded next to its name (issue 34)
    recorded = dict(
        record,
        templates='single',
        templates_sha256=templates_sha256(single),
        prompt_style='plain')

    def written(path):
        return (open(path, 'rb').read(), open(sidecar_path(path)).read())

    def by_hand(name, emb, rows, **row_map):
        path = str(tmp_path / 'hand' / name)
        save_text_embeddings(path, emb, rows, text_model=recorded, **row_map)
        return written(path)

    # one row per class, a background row
    path = str(tmp_path / 'classes.npy')
    emb, rows = te.write_text_embeddings(
        path, ['cat', 'dog'],
        CharEncoder(),
        record,
        templates='single',
        prompt_style='plain',
        background=True)
    assert rows == ['cat', 'dog', 'background']
    want = build_class_embeddings(['cat', 'dog'],
                                  CharEncoder(),
                                  single,
                                  background=True,
                                  prompt_style='plain')
    assert written(path) == by_hand('classes.npy', *want)
    # a class named twice (ImageNet's lists): equal rows
    path = str(tmp_path / 'listed.npy')
    emb, rows = te.write_text_embeddings(
        path, ['a', 'b', 'a'],
        CharEncoder(),
        record,
        templates='single',
        prompt_style='plain',
        repeated_names=True)
    assert rows == ['a', 'b', 'a'] and np.array_equal(emb[0], emb[2])
    assert written(path) == by_hand(
        'listed.npy',
        te.embed_names(['a', 'b', 'a'], CharEncoder(), single, 'plain'),
        ['a', 'b', 'a'])
    # several names per class: the row-to-class map
    path = str(tmp_path / 'queries.npy')
    lines = [['sky', 'air'], ['cat']]
    te.write_text_embeddings(
        path, ['sky', 'cat'],
        CharEncoder(),
        record,
        templates='single',
        prompt_style='plain',
        class_name_lines=lines)
    emb, queries, query_class = te.build_query_embeddings(
        lines, CharEncoder(), single, 'plain')
    assert written(path) == by_hand(
        'queries.npy',
        emb,
        queries,
        query_class=query_class,
        classes=['sky', 'cat'])
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        'classes.json', 'classes.npy', 'hand', 'listed.json', 'listed.npy',
        'queries.json', 'queries.npy'
    ]


def test_write_text_embeddings_refuses_before_encoding(tmp_path):
    encoder = CharEncoder()
    write = te.write_text_embeddings
    with pytest.raises(ValueError, match='must be a .npy file: x.pt'):
        write('x.pt', ['a'], encoder, {})
    with pytest.raises(ValueError, match="templates must be one of .* 'x'"):
        write(str(tmp_path / 'x.npy'), ['a'], encoder, {}, templates='x')
    with pytest.raises(ValueError, match='background row goes with one row'):
        write(
            str(tmp_path / 'x.npy'), ['a'],
            encoder, {},
            background=True,
            repeated_names=True)
    assert encoder.calls == [] and list(tmp_path.iterdir()) == []


# -- issue 35: messages that name the file, the row and the fix -----------


def _saved(tmp_path, rows=None):
    path = str(tmp_path / 'emb.npy')
    emb = np.eye(3, 4, dtype=np.float32) if rows is None else rows
    save_text_embeddings(
        path, emb, ['cat', 'dog', 'background'], text_model=dict(name='X'))
    return path


def test_truncated_sidecar_names_file_line_and_fix(tmp_path):
    """json.load's bare 'Unterminated string ...' named no file."""
    path = _saved(tmp_path)
    side = sidecar_path(path)
    with open(side, 'rb') as f:
        data = f.read()
    with open(side, 'wb') as f:
        f.write(data[:len(data) // 2])
    for read in (load_text_embeddings, te.load_query_embeddings,
                 te.read_text_model):
        with pytest.raises(ValueError) as info:
            read(path)
        message = str(info.value)
        assert message.startswith(f'{side}:'), message
        assert 'not valid JSON (it ends early: truncated?)' in message
        assert 'write them again (tools/misc/dump_text_embeddings.py)' in \
            message


def test_all_zero_row_is_named_by_index_and_class(tmp_path):
    """_normalize said only 'embeddings must be finite and non-zero'."""
    rows = np.eye(3, 4, dtype=np.float32)
    rows[1] = 0
    path = _saved(tmp_path, rows)
    with pytest.raises(ValueError) as info:
        load_text_embeddings(path, ['cat', 'dog'])
    assert str(info.value) == (
        f"{path}: row 1 ('dog') is all zeros; write the file again "
        '(tools/misc/dump_text_embeddings.py)')
    # several names per class: the row's query and its class
    mapped = str(tmp_path / 'mapped.npy')
    rows = np.eye(3, 4, dtype=np.float32)
    rows[1] = 0
    save_text_embeddings(
        mapped,
        rows, ['person', 'man', 'car'],
        query_class=[0, 0, 1],
        classes=['person', 'car'])
    with pytest.raises(ValueError) as info:
        te.load_query_embeddings(mapped)
    assert str(info.value).startswith(
        f"{mapped}: row 1 ('man' of class 'person') is all zeros")


def test_an_old_shape_sidecar_is_read_in_the_one_shape(tmp_path):
    """Issue 34: the sidecar had two shapes; the writer writes one and a
    file written in the former one (a plain JSON list of names next to
    its .npy, as save_text_embeddings wrote without a text_model) is read
    converted."""
    from mmlocat.text.embeddings import read_sidecar
    rows = np.random.RandomState(0).randn(3, 4).astype(np.float32)
    path = str(tmp_path / 'old.npy')
    np.save(path, rows)
    with open(sidecar_path(path), 'w', encoding='utf-8') as f:
        json.dump(['a', 'b', 'background'], f, indent=0)
    assert read_sidecar(
        sidecar_path(path)) == dict(classes=['a', 'b', 'background'])
    assert te.read_text_model(path) == {}
    emb, bg, names = load_text_embeddings(path, ['a', 'b'])
    assert names == ['a', 'b'] and bg is not None and emb.shape == (2, 4)
    with open(sidecar_path(path), 'w', encoding='utf-8') as f:
        json.dump('a', f)
    with pytest.raises(ValueError, match=f'{sidecar_path(path)} holds a str'):
        read_sidecar(sidecar_path(path))


def test_templates_are_recorded_by_content_and_checked(tmp_path):
    """Issue 34: a sidecar recorded its templates by name only: a set
    edited under the same name passed the check."""
    path = str(tmp_path / 'e.npy')
    te.write_text_embeddings(
        path, ['cat'],
        CharEncoder(),
        dict(name='m'),
        templates='single',
        prompt_style='plain')
    record = te.read_text_model(path)
    assert record['templates_sha256'] == templates_sha256(
        te.TEMPLATE_SETS['single'])
    want = dict(templates='single', prompt_style='plain')
    check_prompt_recipe(record, path, want, 'M', te.TEMPLATE_SETS)
    edited = dict(record, templates_sha256=templates_sha256(['a {}.']))
    with pytest.raises(
            ValueError,
            match="written with the templates 'single' of sha256 .* the set "
            'of that name is now'):
        check_prompt_recipe(edited, path, want, 'M', te.TEMPLATE_SETS)
    check_prompt_recipe(edited, path, dict(templates=None), 'M',
                        te.TEMPLATE_SETS)
