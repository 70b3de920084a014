"""mmlocat.apis.vocabulary: parsing, provenance lookup, config."""
import json

import numpy as np
import pytest
import torch
from mmengine.config import Config

from mmlocat.apis import vocabulary as voc
from mmlocat.text import (load_text_embeddings, save_text_embeddings,
                          vocabulary_embeddings)
from mmlocat.utils.checkpoint_io import save_checkpoint
from mmlocat.utils.records import file_sha256, rows_sha256
from mmlocat.utils.safe_load import load_array


def test_parse_vocabulary(tmp_path):
    assert voc.parse_vocabulary(' cat, remote control ,, traffic cone,') == [
        'cat', 'remote control', 'traffic cone'
    ]
    assert voc.parse_vocabulary(['dog ', 'cat']) == ['dog', 'cat']
    txt = tmp_path / 'names.txt'
    txt.write_text('cat\nremote control\n')
    assert voc.parse_vocabulary(str(txt)) == ['cat', 'remote control']
    # issue 34: an empty line in a list is an error naming file and line
    txt.write_text('cat\n\nremote control\n')
    with pytest.raises(ValueError, match=f'{txt}:2: empty line'):
        voc.parse_vocabulary(str(txt))
    js = tmp_path / 'names.json'
    js.write_text(json.dumps(['a, b']))  # a file name is not split
    assert voc.parse_vocabulary(str(js)) == ['a, b']
    for bad, message in ((' , ', 'empty class list'), ('', 'empty'),
                         ([], 'empty'), ('cat, cat', 'listed twice'),
                         ('cat, background', 'reserved'), ([1],
                                                           'must be strings')):
        with pytest.raises(ValueError, match=message):
            voc.parse_vocabulary(bad)
    with pytest.raises(FileNotFoundError, match='missing.txt'):
        voc.parse_vocabulary(str(tmp_path / 'missing.txt'))


def _cfg(emb, checkpoint=None, base=None):
    init = None if checkpoint is None else dict(
        type='Pretrained', checkpoint=checkpoint, prefix='backbone.')
    head = dict(text_embeddings=emb, class_names=['x', 'y'])
    if base is not None:
        head['base_class_names'] = base
    return Config(
        dict(
            model=dict(
                train_class_names=['x'],
                backbone=dict(init_cfg=init),
                roi_head=dict(bbox_head=head))))


def test_recorded_text_model(tmp_path):
    rows = np.eye(3, 4, dtype=np.float32)
    plain = save_text_embeddings(
        str(tmp_path / 'plain.npy'), rows, ['x', 'y', 'background'])
    # nothing recorded anywhere: empty record, the places looked at named
    record, where = voc.recorded_text_model(_cfg(plain))
    assert record == {} and 'plain.json' in where
    # the backbone checkpoint's meta['clip'] (written by the converters)
    ckpt = str(tmp_path / 'clip.pth')
    clip = dict(name='ViT-B-16', weights='ViT-B-16.pt', sha256='ab')
    save_checkpoint({'w': torch.zeros(1)}, ckpt, meta=dict(clip=clip))
    assert voc.recorded_text_model(_cfg(plain, ckpt)) == (clip, ckpt)
    # the embedding sidecar comes first
    text = dict(name='ViT-L-14', weights='l.pt', templates='clip')
    recorded = save_text_embeddings(
        str(tmp_path / 'rec.npy'),
        rows, ['x', 'y', 'background'],
        text_model=text)
    # the sidecar's record also fingerprints its rows (issue 34)
    text = dict(text, rows_sha256=rows_sha256(load_array(recorded)))
    assert voc.recorded_text_model(_cfg(recorded,
                                        ckpt)) == (text,
                                                   str(tmp_path / 'rec.json'))
    with pytest.raises(ValueError, match='F-ViT config'):
        voc.recorded_text_model(Config(dict(model=dict(backbone=dict()))))
    # the detector checkpoint's meta, already read by the caller (the
    # inferencer's ModelCheckpoint), is not read again: the file is gone
    detector = str(tmp_path / 'detector.pth')
    assert voc.recorded_text_model(_cfg(plain), detector,
                                   dict(clip=clip)) == (clip, detector)


def test_resolve_text_model(tmp_path):
    weights = tmp_path / 'w.bin'
    weights.write_bytes(b'123')
    record = dict(name='m', weights='w.bin', sha256=file_sha256(str(weights)))
    assert voc.resolve_text_model(
        record, 'here', search_dirs=[str(tmp_path)]) == ('m', str(weights))
    with pytest.raises(ValueError, match=r'pass --text-model \('):
        voc.resolve_text_model({}, 'X.json')
    with pytest.raises(ValueError, match='not in .*pass --text-weights'):
        voc.resolve_text_model(record, 'X.json', search_dirs=['/nowhere'])
    other = tmp_path / 'o.bin'
    other.write_bytes(b'456')
    with pytest.raises(ValueError, match='has sha256'):
        voc.resolve_text_model(record, 'X', text_weights=str(other))
    # another model named explicitly: the recorded hash does not apply
    assert voc.resolve_text_model(
        record, 'X', text_model='n',
        text_weights=str(other)) == ('n', str(other))


def test_apply_vocabulary():
    cfg = _cfg('old.npy', base=['person', 'car'])
    voc.apply_vocabulary(cfg, 'new.npy', ['car', 'cat'])
    head = cfg.model.roi_head.bbox_head
    assert head.text_embeddings == 'new.npy' and head.class_names is None
    assert head.base_class_names == ['car']
    assert cfg.model.train_class_names is None
    cfg = _cfg('old.npy')  # no base classes: all stay base
    voc.apply_vocabulary(cfg, 'new.npy', ['car', 'cat'])
    assert cfg.model.roi_head.bbox_head.get('base_class_names') is None


def test_zero_shot_vocabulary(tmp_path):
    rows = np.eye(2, 4, dtype=np.float32)
    text = dict(name='ViT-B-16', weights='b.pt', templates='imagenet80')
    emb = save_text_embeddings(
        str(tmp_path / 'voc20.npy'), rows, ['x', 'y'], text_model=text)
    cfg = Config(
        dict(
            model=dict(
                type='mmlocat.ZeroShotSegmentor',
                text_embeddings=emb,
                classes=['x', 'y'],
                bg_thresh=0.5,
                backbone=dict(init_cfg=None))))
    assert voc.is_zero_shot_config(cfg)
    assert not voc.is_zero_shot_config(_cfg(emb))
    assert voc.embeddings_file(cfg) == emb
    # the sidecar's record also fingerprints its rows (issue 34)
    text = dict(text, rows_sha256=rows_sha256(load_array(emb)))
    assert voc.recorded_text_model(cfg) == (text, str(tmp_path / 'voc20.json'))
    voc.apply_zero_shot_vocabulary(cfg, 'new.npy', ['cat'])
    assert cfg.model.text_embeddings == 'new.npy'
    assert cfg.model.classes is None and cfg.model.bg_thresh == 0.5
    # SCLIP's text background (class-name file, prob_thd) is the dataset's:
    # typed names go without it
    cfg.model.update(class_name_file='voc20.txt', prob_thd=0.1)
    voc.apply_zero_shot_vocabulary(cfg, 'new.npy', ['cat'])
    assert cfg.model.class_name_file is None and cfg.model.prob_thd == 0
    with pytest.raises(ValueError, match='not a zero-shot segmentation'):
        voc.apply_zero_shot_vocabulary(_cfg(emb), 'new.npy', ['cat'])
    # the zero-shot segmentor's file has no background row
    path = vocabulary_embeddings(['cat'],
                                 'm',
                                 'tag',
                                 background=False,
                                 cache_dir=str(tmp_path),
                                 encoder=lambda p: torch.ones(len(p), 4))
    assert load_text_embeddings(path)[1] is None
    assert path != vocabulary_embeddings(
        ['cat'],
        'm',
        'tag',
        cache_dir=str(tmp_path),
        encoder=lambda p: torch.ones(len(p), 4))


def test_resolve_text_model_compares_text_towers(tmp_path):
    """With a recorded ``text_sha256`` the text tower decides: the EVA
    repo's file and open_clip's file of one model are both accepted (their
    bytes differ), one changed text value or a file without a text tower
    is refused."""
    from helpers import sources

    from mmlocat.utils.records import text_sha256
    state = sources.open_clip_state_dict('EVA02-B-16', seed=3)
    bin_file, eva_file, changed = (
        str(tmp_path / n) for n in ('open_clip.bin', 'eva.pt', 'changed.bin'))
    torch.save(state, bin_file)
    torch.save(sources.eva_clip_state_dict('EVA02-B-16', seed=3), eva_file)
    fingerprint = text_sha256(state)
    record = dict(
        name='EVA02-B-16',
        weights='eva.pt',
        sha256=file_sha256(eva_file),
        text_sha256=fingerprint)
    for weights in (eva_file, bin_file):
        assert voc.resolve_text_model(
            record, 'X.json', text_weights=weights) == ('EVA02-B-16', weights)
    other = dict(state)
    other['text.ln_final.weight'] = other['text.ln_final.weight'] + 1e-3
    torch.save(other, changed)
    with pytest.raises(ValueError) as err:
        voc.resolve_text_model(record, 'X.json', text_weights=changed)
    assert str(err.value) == (
        f'{changed} holds the text tower {text_sha256(other)} but X.json '
        f'records the text tower {fingerprint} (of eva.pt) for CLIP '
        "EVA02-B-16: pass the text weights of the detector's CLIP")
    assert text_sha256(other) != fingerprint


def test_text_weights_found_in_the_readmes_layout(tmp_path, monkeypatch):
    """The READMEs keep CLIP weights in ./checkpoints and the detector's
    embeddings under data/: a bare recorded file name is found there, after
    the sidecar's and the checkpoint's folders; when it is nowhere, the
    message names every place searched and --text-weights."""
    from mmlocat.apis.inferencer import text_weights_dirs
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'checkpoints').mkdir()
    weights = tmp_path / 'checkpoints' / 'ViT-B-16.pt'
    weights.write_bytes(b'clip')
    record = dict(
        name='ViT-B-16', weights='ViT-B-16.pt', sha256=file_sha256(weights))
    dirs = text_weights_dirs('data/coco/embeddings/x.npy',
                             'work_dirs/fvit/iter_1.pth')
    assert dirs == ['data/coco/embeddings', 'work_dirs/fvit', 'checkpoints']
    assert text_weights_dirs('', 'iter_1.pth') == ['checkpoints']
    assert voc.resolve_text_model(
        record, 'iter_1.pth',
        search_dirs=dirs) == ('ViT-B-16', 'checkpoints/ViT-B-16.pt')
    weights.unlink()
    with pytest.raises(ValueError) as err:
        voc.resolve_text_model(record, 'iter_1.pth', search_dirs=dirs)
    for place in dirs + ['--text-weights']:
        assert place in str(err.value)


def test_a_named_list_is_a_vocabulary_of_its_names():
    """Issue 34: ``--classes imagenet_open_clip`` was one class of that
    name; a single typed name is still one class."""
    from mmlocat.text.class_names import imagenet_class_names
    assert voc.parse_vocabulary('imagenet_open_clip') == imagenet_class_names(
        'open_clip')
    assert voc.parse_vocabulary('cat') == ['cat']
