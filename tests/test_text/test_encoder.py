"""mmlocat.text.encoder: the one open_clip text encoder.

Weights named by a file and by an open_clip pretrained tag both go through
:class:`~mmlocat.models.clip.OpenCLIPTextTower`; before, a tag went through
``open_clip.create_model``. The old tag path is transcribed here (open_clip's
``create_model`` with the tag, its download replaced by the local file) and
must give the same features bit for bit, and the same sidecar record.
"""
import json
import sys

import open_clip
import pytest
import torch
from helpers.tiny_archs import tiny_open_clip_cfg

from mmlocat.models.clip.text_tower import open_clip_text_act
from mmlocat.text import encoder_record, open_clip_encoder
from mmlocat.utils.hosts import require_open_clip
from mmlocat.utils.records import clip_provenance, text_provenance

PROMPTS = ['a photo of a cat.', 'There is an aerosol can in the scene.', 'x']
TAG = 'tiny_tag'


@pytest.fixture(scope='module', params=[False, True], ids=['gelu', 'quick'])
def tiny(request, tmp_path_factory):
    """(model name, weights file) of a random-init open_clip CLIP."""
    quick = request.param
    name = f'tiny-enc-{"quick" if quick else "gelu"}'
    tmp = tmp_path_factory.mktemp(name)
    cfg = dict(
        tiny_open_clip_cfg(embed_dim=8, text_width=16), quick_gelu=quick)
    (tmp / f'{name}.json').write_text(json.dumps(cfg))
    open_clip.add_model_config(str(tmp / f'{name}.json'))
    torch.manual_seed(0)
    weights = str(tmp / 'weights.bin')
    torch.save(open_clip.create_model(name).state_dict(), weights)
    return name, weights


@pytest.fixture
def tag_is_the_file(tiny, monkeypatch):
    """open_clip knows ``TAG`` for the tiny model; its "download" is the
    local weights file (in open_clip's package and its factory alike)."""
    name, weights = tiny

    def pretrained_cfg(model, tag):
        return dict(url='unused') if (model, tag) == (name, TAG) else {}

    for module in (open_clip, open_clip.factory):
        monkeypatch.setattr(module, 'get_pretrained_cfg', pretrained_cfg)
        monkeypatch.setattr(module, 'download_pretrained',
                            lambda cfg, **kwargs: weights)


def _old_tag_encoder(name):
    """The vocabulary path as it was for a tag: open_clip's full model."""
    model = open_clip.create_model(name, pretrained=TAG).eval()
    tokenizer = open_clip.get_tokenizer(name)
    record = dict(
        name=name,
        weights=TAG,
        **text_provenance(model.state_dict(), open_clip_text_act(model)))

    def encode(prompts):
        with torch.no_grad():
            return model.encode_text(tokenizer(prompts))

    return encode, record


def test_a_tag_encodes_as_open_clips_create_model(tiny, tag_is_the_file):
    name, _ = tiny
    old, old_record = _old_tag_encoder(name)
    new = open_clip_encoder(name, TAG)
    assert torch.equal(new(PROMPTS), old(PROMPTS))
    assert new.record == old_record
    assert new.record['text_act'] == ('quick_gelu'
                                      if name.endswith('quick') else 'gelu')
    assert encoder_record(new, 'other', 'w') == old_record


def test_a_file_encodes_as_open_clips_create_model(tiny):
    name, weights = tiny
    model = open_clip.create_model(name, pretrained=weights).eval()
    with torch.no_grad():
        want = model.encode_text(open_clip.get_tokenizer(name)(PROMPTS))
    new = open_clip_encoder(name, weights)
    assert torch.equal(new(PROMPTS), want)
    # a file is recorded by its name and hash, with the same fingerprint
    assert new.record == dict(
        clip_provenance(name, weights),
        **text_provenance(model.state_dict(), open_clip_text_act(model)))


def test_unknown_tag(tiny):
    name, _ = tiny
    with pytest.raises(
            ValueError,
            match="'nope' is neither a weights file nor an "
            f'open_clip pretrained tag of {name}'):
        open_clip_encoder(name, 'nope')


def test_one_guard_for_open_clip(monkeypatch):
    assert require_open_clip('x') is open_clip
    monkeypatch.setitem(sys.modules, 'open_clip', None)
    with pytest.raises(
            ImportError,
            match='text embeddings needs open_clip: pip install '
            'open_clip_torch'):
        open_clip_encoder('ViT-B-16', None)
