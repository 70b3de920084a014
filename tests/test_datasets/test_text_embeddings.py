"""Text embeddings: prompt ensembling, files, validation against classes."""
import json

import numpy as np
import pytest
import torch

from mmlocat.datasets import text_embeddings as te

PROMPT_TEMPLATES = te.PROMPT_TEMPLATES
CLIP_TEMPLATES = te.CLIP_TEMPLATES
build_class_embeddings = te.build_class_embeddings
load_text_embeddings = te.load_text_embeddings
names_from_annotations = te.names_from_annotations
resolve_class_names = te.resolve_class_names
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


def test_templates():
    """F-ViT's 63 templates (CLIPSelf F-ViT/tools/clip_utils.py) are the
    default; CLIP's ImageNet-style set stays as an option."""
    assert PROMPT_TEMPLATES is te.FVIT_TEMPLATES
    assert len(PROMPT_TEMPLATES) == 63 == len(set(PROMPT_TEMPLATES))
    assert all(t.count('{}') == 1 for t in PROMPT_TEMPLATES)
    assert PROMPT_TEMPLATES[:2] == ('There is {article} {} in the scene.',
                                    'There is the {} in the scene.')
    assert PROMPT_TEMPLATES[-1] == 'a painting of a {}.'
    for named in ('itap of {article} {}.', 'a bad photo of the {}.',
                  'an embroidered {}.', 'a plushie {}.'):
        assert named in PROMPT_TEMPLATES
    assert sum('{article}' in t for t in PROMPT_TEMPLATES) == 15
    assert len(CLIP_TEMPLATES) == 63 == len(set(CLIP_TEMPLATES))
    assert 'a photo of a {}.' in CLIP_TEMPLATES
    assert te.TEMPLATE_SETS['single'] == ('a photo of a {}.', )


def test_fvit_prompt_rules():
    prompts = te.fvit_prompts('aerosol_can', PROMPT_TEMPLATES)
    assert prompts[0] == 'There is an aerosol can in the scene.'
    assert prompts[5] == 'itap of an aerosol can.'
    assert prompts[8] == 'This is a photo of an aerosol can.'
    assert prompts[10] == 'This is a photo of the aerosol can.'
    assert prompts[-1] == 'This is a painting of a aerosol can.'
    assert 'This is an embroidered aerosol can.' in prompts
    # lower case, '/' read as "or", trailing dots dropped; the article looks
    # at the raw name (a capital vowel gets "a", as in F-ViT).
    assert te.fvit_prompts('Salad/Plate.', ['itap of {article} {}.']) == [
        'itap of a salad or plate.'
    ]
    assert te.fvit_prompts('Apple', ['a photo of {article} {}.']) == [
        'This is a photo of a apple.'
    ]
    assert te.fvit_prompts('egg', ['the {}.', 'There is {article} {}.']) == [
        'This is the egg.', 'There is an egg.'
    ]


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
    assert json.load(open(sidecar_path(path))) == ['a', 'b', 'background']
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
    assert json.load(open(sidecar_path(path))) == dict(
        classes=['a', 'b', 'background'], text_model=record)
    assert te.read_text_model(path) == record
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


def test_names_from_annotations_and_resolve(tmp_path):
    cats = [
        dict(id=3, name='c', frequency='r'),
        dict(id=1, name='a', frequency='f'),
        dict(id=2, name='b', frequency='c')
    ]
    assert names_from_annotations(dict(categories=cats)) == (['a', 'b',
                                                              'c'], ['a', 'b'])
    coco = [
        dict(id=1, name='a', split='base'),
        dict(id=2, name='n', split='novel')
    ]
    assert names_from_annotations(dict(categories=coco)) == (['a', 'n'], ['a'])
    lvis = resolve_class_names('LVISV1Dataset')
    assert len(lvis) == 1203 and lvis[0] == 'aerosol_can'
    txt = tmp_path / 'names.txt'
    txt.write_text('x\ny\n')
    assert resolve_class_names(str(txt)) == ['x', 'y']
    # An annotation file gives its categories in id order.
    ann = tmp_path / 'ann.json'
    ann.write_text(json.dumps(dict(categories=cats)))
    assert resolve_class_names(str(ann)) == ['a', 'b', 'c']
    with pytest.raises(ValueError, match='neither'):
        resolve_class_names('NoSuchDataset')


def test_imagenet80_templates_are_open_clips():
    """The 80-prompt set is CLIP's ImageNet list as open_clip ships it."""
    from open_clip.zero_shot_metadata import OPENAI_IMAGENET_TEMPLATES

    from mmlocat.datasets.text_embeddings import (IMAGENET_TEMPLATES,
                                                  TEMPLATE_SETS)
    assert TEMPLATE_SETS['imagenet80'] is IMAGENET_TEMPLATES
    assert list(IMAGENET_TEMPLATES) == [
        t('{}') for t in OPENAI_IMAGENET_TEMPLATES
    ]


def _names_file(tmp_path, text, name='names.txt'):
    path = tmp_path / name
    path.write_bytes(text.encode('utf-8'))
    return str(path)


def test_class_name_files_read_as_sclips_get_cls_idx(tmp_path):
    """Line k = class k, names split at exactly ', ' (SCLIP's
    ``get_cls_idx``); a missing last newline and CRLF are read the same."""
    lines = [['person', 'person in shirt'], ['ship'], ['a,b', 'c ']]
    for text in ('person, person in shirt\nship\na,b, c ',
                 'person, person in shirt\nship\na,b, c \n',
                 'person, person in shirt\r\nship\r\na,b, c \r\n'):
        assert te.read_class_name_file(_names_file(tmp_path, text)) == lines
    for text, match in (('a\n\nb\n', ':2: empty class name'),
                        ('a, , b\n', ':1: empty class name'),
                        ('a, a\n', ':1: a name is listed twice'),
                        ('', 'is empty'), ('\n', 'is empty')):
        with pytest.raises(ValueError, match=match):
            te.read_class_name_file(_names_file(tmp_path, text))
    with pytest.raises(FileNotFoundError, match='nope.txt'):
        te.read_class_name_file(str(tmp_path / 'nope.txt'))


def test_class_name_lines_against_the_dataset():
    classes = ['aeroplane', 'boat', 'traffic light', 'background']
    # another class's name is fine where that class's line has it too
    ok = [['aeroplane'], ['ship'], ['trafficlight'], ['sky', 'aeroplane']]
    te.check_class_name_lines(ok, classes, 'f.txt')
    # where it has not, it reads as a misplaced line
    with pytest.raises(ValueError, match="f.txt:4 lists 'boat'"):
        te.check_class_name_lines(ok[:3] + [['sky', 'boat']], classes, 'f.txt')
    with pytest.raises(ValueError, match='f.txt has 3 lines .* 4 classes'):
        te.check_class_name_lines(ok[:3], classes, 'f.txt')
    swapped = [['aeroplane'], ['trafficlight'], ['ship'], ['sky']]
    with pytest.raises(
            ValueError,
            match="f.txt:2 lists 'trafficlight', the "
            "name of dataset class 2 \\('traffic light'\\)"):
        te.check_class_name_lines(swapped, classes, 'f.txt')


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
        text_model=dict(templates='imagenet80'))
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
