"""export_image_tower / export_text_tower: a trained CLIPContrastive
checkpoint -> the backbone file and, for a trained text tower, its open_clip
text weights (the tool's path runs in tests/test_e2e/test_lastclip_e2e.py).
"""
import pytest
import torch
from mmengine.config import Config

from mmlocat.models.clip.export import (export_image_tower, export_text_tower,
                                        text_is_trained)
from mmlocat.utils.records import file_sha256, text_sha256, weights_sha256

TRAINED = dict(
    type='mmlocat.CLIPContrastive',
    image_encoder=dict(type='mmlocat.CLIPViT', arch='b', init_cfg=None),
    text_encoder=dict(
        model_name='ViT-B-16-quickgelu', weights='checkpoints/ViT-B-16.pt'),
    lock_text=True)
# what CLIPProvenanceHook recorded while training
RUN = dict(
    text=dict(name='ViT-B-16-quickgelu', weights='ViT-B-16.pt', sha256='ab'),
    image=dict(
        name='ViT-B-16-quickgelu',
        weights='ViT-B-16.pt',
        sha256='ab',
        act='quick_gelu',
        checkpoint='checkpoints/clip-vit-b16_mmlocat.pth'))


def _checkpoint(model=TRAINED, run=RUN, sha256='f00d', **extra):
    cfg = Config(dict(model=model, custom_imports=dict(imports=['nowhere'])))
    state = {
        'image_encoder.proj': torch.ones(2, 2),
        'text_encoder.model.token_embedding.weight': torch.ones(5, 2),
        'text_encoder.model.ln_final.weight': torch.full((2, ), 3.),
        'text_encoder.model.text_projection': torch.ones(2, 2),
        'logit_scale': torch.tensor(4.5)
    }
    meta = dict(cfg=cfg.pretty_text, **extra)
    if run is not None:
        meta['clip_provenance'] = run
    return dict(state_dict=state, meta=meta, sha256=sha256)


# the text tower of _checkpoint() under open_clip's names
TEXT = dict([('token_embedding.weight', torch.ones(5, 2)),
             ('ln_final.weight', torch.full((2, ), 3.)),
             ('text_projection', torch.ones(2, 2))])


def test_locked_text_tower_records_the_clip_trained_against():
    state, meta = export_image_tower(_checkpoint(), 'run/iter_100.pth')
    assert list(state) == ['backbone.proj']
    # bound to the exported weights (issue 34)
    assert meta['clip'].pop('image_sha256') == weights_sha256(state)
    assert meta['clip'] == dict(
        name='ViT-B-16-quickgelu',
        weights='ViT-B-16.pt',
        sha256='ab',
        text_sha256=text_sha256(TEXT),
        act='quick_gelu',
        source='lastclip:f00d')
    # the run's text activation and fingerprint (CLIPProvenanceHook): the
    # activation is recorded; a locked tower whose weights are not the
    # recorded ones was trained after all
    run = dict(
        RUN,
        text=dict(
            RUN['text'], text_sha256=text_sha256(TEXT), text_act='quick_gelu'))
    _, meta = export_image_tower(_checkpoint(run=run), 'x.pth')
    assert meta['clip']['text_act'] == 'quick_gelu'
    run['text']['text_sha256'] = 'beef'
    with pytest.raises(
            ValueError,
            match=r'x\.pth: the text tower was locked, but its weights in '
            rf'the checkpoint \(text tower {text_sha256(TEXT)}\) are not '
            r'the ones the run recorded at its start \(beef of ViT-B-16\.pt'
            r'\)'):
        export_image_tower(_checkpoint(run=run), 'x.pth')
    assert meta['lastclip']['lock_text'] is True
    assert meta['lastclip']['sha256'] == 'f00d'
    assert meta['lastclip']['image_init'] == RUN['image']
    # the activation of the config wins over the init record
    model = dict(
        TRAINED, image_encoder=dict(TRAINED['image_encoder'], act='gelu'))
    _, meta = export_image_tower(_checkpoint(model), 'x.pth')
    assert meta['clip']['act'] == 'gelu'


def test_trained_text_tower_is_written_and_recorded(tmp_path):
    model = dict(TRAINED, lock_text=False)
    ckpt = _checkpoint(model)
    assert text_is_trained(ckpt, 'x.pth')
    text, text_meta = export_text_tower(ckpt, 'x.pth')
    # open_clip's own key names, the trained scale
    assert list(text) == [
        'token_embedding.weight', 'ln_final.weight', 'text_projection',
        'logit_scale'
    ]
    assert float(text['logit_scale']) == 4.5
    assert text_meta == dict(
        open_clip_text=dict(
            model_name='ViT-B-16-quickgelu', source='lastclip:f00d'))
    path = str(tmp_path / 'text.pth')
    torch.save(dict(state_dict=text, meta=text_meta), path)
    # a text tower given as an open_clip model config: plain types in the
    # meta, so torch's weights-only loader reads the file
    custom = dict(
        model, text_encoder=dict(model_cfg=dict(embed_dim=2, text_cfg={})))
    _, custom_meta = export_text_tower(_checkpoint(custom), 'x.pth')
    assert custom_meta['open_clip_text']['model_cfg'] == dict(
        embed_dim=2, text_cfg={})
    torch.save(dict(state_dict=text, meta=custom_meta), path)
    assert torch.load(path, weights_only=True)['meta'] == custom_meta
    torch.save(dict(state_dict=text, meta=text_meta), path)
    tower, meta = export_image_tower(ckpt, 'x.pth', text_file=path)
    assert meta['clip'].pop('image_sha256') == weights_sha256(tower)
    assert meta['clip'] == dict(
        name='ViT-B-16-quickgelu',
        weights='text.pth',
        sha256=file_sha256(path),
        text_sha256=text_sha256(TEXT),
        act='quick_gelu',
        source='lastclip:f00d')
    assert meta['lastclip']['lock_text'] is False
    with pytest.raises(ValueError, match='--text-out'):
        export_image_tower(ckpt, 'x.pth')
    with pytest.raises(ValueError, match='drop --text-out'):
        export_image_tower(_checkpoint(), 'x.pth', text_file=path)
    with pytest.raises(ValueError, match='was locked'):
        export_text_tower(_checkpoint(), 'x.pth')


def test_nothing_that_names_the_text_tower_is_an_error():
    with pytest.raises(ValueError, match="records no CLIP provenance"):
        export_image_tower(_checkpoint(run=None), 'x.pth')
    # a locked text tower without weights (random init): no record
    run = dict(RUN, text=dict(name='ViT-B-16-quickgelu'))
    with pytest.raises(ValueError, match='empty record'):
        export_image_tower(_checkpoint(run=run), 'x.pth')


def test_errors():
    with pytest.raises(ValueError, match=r"no training config in meta"):
        export_image_tower(dict(state_dict={}, meta={}), 'x.pth')
    with pytest.raises(ValueError, match='not mmlocat.CLIPContrastive'):
        export_image_tower(_checkpoint(dict(type='ImageClassifier')), 'x.pth')
    run = dict(RUN, image={})
    with pytest.raises(ValueError, match='pass --act'):
        export_image_tower(_checkpoint(run=run), 'x.pth')
    with pytest.raises(ValueError, match="--act gelu but the tower was"):
        export_image_tower(_checkpoint(), 'x.pth', act='gelu')
    state, meta = export_image_tower(_checkpoint(run=run), 'x.pth', act='gelu')
    assert meta['clip']['act'] == 'gelu'
    empty = _checkpoint()
    empty['state_dict'] = {'logit_scale': torch.tensor(1.)}
    with pytest.raises(ValueError, match=r'no image_encoder\.\* weights'):
        export_image_tower(empty, 'x.pth')
    with pytest.raises(ValueError, match='sha256 of the training checkpoint'):
        export_image_tower(_checkpoint(sha256=None), 'x.pth')
