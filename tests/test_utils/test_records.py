"""The text-tower fingerprint and the same-CLIP rule
(mmlocat/utils/records.py)."""
import hashlib
import struct
from collections import OrderedDict

import open_clip
import pytest
import torch
from helpers import sources

from mmlocat.utils.records import (check_same_clip, text_provenance,
                                   text_sha256, text_tower_tensors)

# open_clip's text keys of a CLIP (the layout OpenAI's releases use)
TEXT_KEYS = ('token_embedding.', 'positional_embedding', 'transformer.',
             'ln_final.', 'text_projection')


def _fingerprint_by_hand(text: dict) -> str:
    """The canonical form written out with struct, from the docstring's
    definition: per key in sorted order, key NUL shape NUL float32 LE."""
    digest = hashlib.sha256()
    for key in sorted(text):
        values = text[key].double().flatten().tolist()
        shape = ','.join(str(s) for s in text[key].shape)
        digest.update(key.encode('utf-8') + b'\0' + shape.encode() + b'\0')
        digest.update(struct.pack(f'<{len(values)}f', *values))
    return digest.hexdigest()


@pytest.fixture(scope='module')
def clip_state():
    """A random-init open_clip CLIP (OpenAI layout) at the tiny width."""
    return sources.open_clip_state_dict('ViT-B-16-quickgelu', seed=3)


def test_canonical_form(clip_state):
    text = {k: v for k, v in clip_state.items() if k.startswith(TEXT_KEYS)}
    assert 'token_embedding.weight' in text and len(text) > 10
    assert text_tower_tensors(clip_state).keys() == text.keys()
    assert text_sha256(clip_state) == _fingerprint_by_hand(text)


def test_every_layout_of_one_text_tower_has_one_fingerprint(clip_state):
    expected = text_sha256(clip_state)
    # CustomTextCLIP / EVA repo: the text tower under text.
    custom = OrderedDict(
        (k if k.startswith('visual.') or k == 'logit_scale' else 'text.' + k,
         v) for k, v in clip_state.items())
    # DDP's module. prefix, OpenAI's archive ints, a kept causal mask, a
    # text-only file (lastclip2mmlocat.py --text-out) with its scale
    wrapped = {'module.' + k: v for k, v in clip_state.items()}
    extras = dict(
        clip_state,
        input_resolution=torch.tensor(224),
        context_length=torch.tensor(77),
        vocab_size=torch.tensor(49408),
        attn_mask=torch.full((77, 77), float('-inf')).triu(1))
    text_only = {
        k: v
        for k, v in clip_state.items() if not k.startswith('visual.')
    }
    # the storage dtype does not count: OpenAI stores float16 values
    half = {
        k: v.half() if k.startswith(TEXT_KEYS) else v
        for k, v in clip_state.items()
    }
    halved_back = {k: v.float() for k, v in half.items()}
    assert text_sha256(half) == text_sha256(halved_back)
    for layout in (custom, wrapped, extras, text_only):
        assert text_sha256(layout) == expected
    # an image tower alone has no text tower
    visual = {k: v for k, v in clip_state.items() if k.startswith('visual.')}
    assert text_sha256(visual) is None and text_provenance(visual) == {}
    bare_visual = {k[len('visual.'):]: v for k, v in visual.items()}
    assert text_sha256(bare_visual) is None
    # the image tower and the scale are not part of it, every text value is
    other = dict(clip_state, logit_scale=torch.tensor(1.))
    other['visual.proj'] = other['visual.proj'] + 1
    assert text_sha256(other) == expected
    changed = dict(clip_state)
    changed['transformer.resblocks.3.mlp.c_fc.bias'] = changed[
        'transformer.resblocks.3.mlp.c_fc.bias'].clone()
    changed['transformer.resblocks.3.mlp.c_fc.bias'][5] += 1e-6
    assert text_sha256(changed) != expected
    # the shape is part of it
    reshaped = dict(clip_state)
    reshaped['text_projection'] = reshaped['text_projection'].reshape(-1)
    assert text_sha256(reshaped) != expected
    assert text_provenance(clip_state, 'quick_gelu') == dict(
        text_sha256=expected, text_act='quick_gelu')


def _record(weights,
            sha,
            fingerprint=None,
            name='ViT-B-16-quickgelu',
            act=None):
    record = dict(name=name, weights=weights, sha256=sha)
    if fingerprint is not None:
        record['text_sha256'] = fingerprint
    if act is not None:
        record['text_act'] = act
    return record


def test_the_fingerprint_decides_when_both_records_have_it():
    a, b = 'a' * 64, 'b' * 64
    # two files of one CLIP: accepted whatever their names and hashes
    check_same_clip(
        _record('open_clip_pytorch_model.bin', '11', a,
                'EVA02-B-16'), 'emb.npy',
        _record('EVA02_CLIP_B_psz16_s8B.pt', '22', a, 'EVA02-B-16'), 'eva.pth')
    # other text towers: refused naming both files and fingerprints
    with pytest.raises(ValueError) as err:
        check_same_clip(
            _record('x.bin', '11', a), 'emb.npy', _record('y.pt', '22', b),
            'clip.pth')
    assert str(err.value).startswith(
        f'text embeddings emb.npy come from the CLIP text tower {a} (x.bin '
        f'sha256 11) but the backbone checkpoint clip.pth from the CLIP text '
        f'tower {b} (y.pt sha256 22): the text towers differ; ')
    # the same weights read with another activation: refused
    with pytest.raises(
            ValueError,
            match=r"encoded with text activation 'gelu' \(open_clip model "
            r"'ViT-B-16'\) but the backbone checkpoint clip\.pth records "
            r"'quick_gelu' \(open_clip model 'ViT-B-16-quickgelu'\)"):
        check_same_clip(
            _record('x.pt', '11', a, 'ViT-B-16', 'gelu'), 'emb.npy',
            _record('x.pt', '11', a, act='quick_gelu'), 'clip.pth')


def test_records_without_a_fingerprint_compare_names_and_files():
    a = 'a' * 64
    # one side without a fingerprint (an old record): the file hashes
    with pytest.raises(ValueError, match="sha256 '11' but .* from '22'"):
        check_same_clip(
            _record('x.bin', '11', a), 'emb.npy', _record('y.pt', '22'),
            'clip.pth')
    with pytest.raises(ValueError, match="name 'ViT-B-16'"):
        check_same_clip(
            _record('x.bin', '11', name='ViT-B-16'), 'emb.npy',
            _record('x.bin', '11'), 'clip.pth')
    check_same_clip(
        _record('x.bin', '11'), 'emb.npy', _record('x.bin', '11'), 'c.pth')
    check_same_clip({}, 'emb.npy', _record('x.bin', '11'), 'c.pth')


def test_open_clip_builds_the_activation_the_configs_name():
    """The text activation the converters read from a config
    (clip_tower_settings) is the one open_clip builds (what the text tower
    and the dump tool record)."""
    from mmlocat.models.clip.text_tower import open_clip_text_act
    from mmlocat.utils.converters.clip import clip_tower_settings
    for name, act in (('ViT-B-16', 'gelu'), ('ViT-B-16-quickgelu',
                                             'quick_gelu'), ('EVA02-B-16',
                                                             'gelu')):
        cfg = sources.tiny_open_clip_config(name)
        assert clip_tower_settings(cfg)['text_act'] == act
        cfg.pop('custom_text', None)
        cfg['vision_cfg'] = dict(
            image_size=16, layers=1, width=8, head_width=8, patch_size=16)
        assert open_clip_text_act(open_clip.CLIP(**cfg)) == act


def test_records_owns_every_record_check():
    """Issue 34: one records module owns every check; the prompt-recipe,
    same-classes and class-file checks lived in mmlocat.text.embeddings
    and mmlocat.datasets.class_file_record, the check of run-time text
    weights in mmlocat.apis.vocabulary, with one path each (no
    re-export); records imports neither text nor datasets, not even in a
    function."""
    from helpers.import_graph import import_graph

    import mmlocat.apis.vocabulary as run_time
    import mmlocat.datasets.class_file_record as dataset_side
    import mmlocat.text as text
    import mmlocat.text.embeddings as embeddings
    from mmlocat.utils import records
    for name in ('check_prompt_recipe', 'check_same_classes',
                 'check_class_files', 'file_record', 'files_record',
                 'check_text_weights'):
        assert getattr(records, name).__module__ == 'mmlocat.utils.records'
        # the old modules neither define nor export it (embeddings calls
        # check_same_classes, imported from records)
        for module in (embeddings, text, dataset_side, run_time):
            assert name not in module.__all__, (module.__name__, name)
            assert getattr(module, name,
                           None) in (None, getattr(records, name))
    graph = import_graph('mmlocat', lazy=True)
    below = {
        d
        for m in graph if m.startswith('mmlocat.utils') for d in graph[m]
    }
    assert not {
        d
        for d in below if d.startswith(('mmlocat.text', 'mmlocat.datasets'))
    }


def test_prompt_recipe_compares_the_templates_the_caller_passes():
    """The templates' content now is the caller's (``text``'s
    ``TEMPLATE_SETS``): the same record passes against the set it was
    written with and is refused against that name edited."""
    from mmlocat.utils.records import check_prompt_recipe, templates_sha256
    record = dict(
        templates='single',
        templates_sha256=templates_sha256(['a photo of a {}.']),
        prompt_style='plain')
    want = dict(templates='single', prompt_style='plain')
    check_prompt_recipe(record, 'e.npy', want, 'M',
                        {'single': ['a photo of a {}.']})
    with pytest.raises(
            ValueError,
            match="e.npy were written with the templates 'single' of "
            'sha256 .* the set of that name is now'):
        check_prompt_recipe(record, 'e.npy', want, 'M', {'single': ['a {}.']})
