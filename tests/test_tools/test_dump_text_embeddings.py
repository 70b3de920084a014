"""tools/misc/dump_text_embeddings.py with a stand-in text encoder."""
import json
import os.path as osp
import sys

import numpy as np
import pytest
import torch
from helpers.harness import run_tool
from helpers.tiny_archs import tiny_open_clip_cfg

from mmlocat.text import TEMPLATE_SETS, load_text_embeddings
from mmlocat.utils.records import rows_sha256, templates_sha256

TOOL = 'tools/misc/dump_text_embeddings.py'


def test_writes_embeddings_names_and_base(tmp_path, load_tool, monkeypatch):
    tool = load_tool(TOOL, 'dump_text_emb')
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


def test_needs_open_clip(load_tool, monkeypatch):
    tool = load_tool(TOOL, 'dump_text_emb')
    monkeypatch.setitem(sys.modules, 'open_clip', None)
    with pytest.raises(ImportError, match='open_clip'):
        tool.open_clip_encoder('ViT-B-16', 'w.pt', 'cpu')


def _fvit_prompts_by_hand(name):
    """F-ViT's prompts for a lower-case name without '/' or trailing dots,
    spelled out from CLIPSelf's build_text_embedding_openclip."""
    from mmlocat.text import FVIT_TEMPLATES
    text = name.replace('_', ' ')
    article = 'an' if name[0] in 'aeiou' else 'a'
    prompts = [t.format(text, article=article) for t in FVIT_TEMPLATES]
    return [('This is ' + p) if p[0] == 'a' or p.startswith('the') else p
            for p in prompts]


@pytest.mark.slow
def test_real_open_clip_text_tower(tmp_path, load_tool, monkeypatch):
    """A random-init open_clip ViT-B-16 saved as a user's file: the tool's
    embeddings are open_clip's own encode_text averaged over F-ViT's
    prompts."""
    import open_clip

    from mmlocat.utils.records import file_sha256, text_sha256
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
    load_tool(TOOL, 'dump_text_emb').main()
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
        text_sha256=text_sha256(model.state_dict()),
        text_act='gelu',
        templates='fvit',
        templates_sha256=templates_sha256(TEMPLATE_SETS['fvit']),
        prompt_style='fvit',
        rows_sha256=rows_sha256(np.load(out)))  # binds the rows (issue 34)


def _stand_in_encoder(model, pretrained, device):
    gen = torch.Generator().manual_seed(0)
    table = torch.randn(128, 6, generator=gen)
    return lambda prompts: torch.stack(
        [table[[ord(c) % 128 for c in p]].sum(0) for p in prompts])


def test_seg_config_writes_the_config_names_and_recipe(tmp_path, repo_root,
                                                       load_tool, monkeypatch,
                                                       capsys):
    """--seg-config: the dataset's classes, one row per name of the config's
    class-name file (SCLIP's synonyms), the config's templates / prompt
    style; repeating them is fine, changing them is refused."""
    from mmlocat.text import (IMAGENET_TEMPLATES, build_query_embeddings,
                              load_query_embeddings, read_class_name_file)
    tool = load_tool(TOOL, 'dump_text_emb')
    monkeypatch.setattr(tool, 'open_clip_encoder', _stand_in_encoder)
    config = osp.join(repo_root, 'configs/last/zeroshot_clip-b16_voc20.py')
    out = str(tmp_path / 'voc20.npy')
    monkeypatch.setattr(sys, 'argv', [
        'dump', '--seg-config', config, '--pretrained', 'w.pt', '--templates',
        'imagenet80', out
    ])
    tool.main()
    assert '30 names, 20 classes, imagenet80 templates, plain' in \
        capsys.readouterr().out
    table = load_query_embeddings(out)
    lines = read_class_name_file(
        osp.join(repo_root, 'configs/last/class_names/voc20.txt'))
    assert table.classes[3] == 'boat' and table.queries[3] == 'ship'
    assert table.queries == [n for names in lines for n in names]
    want = build_query_embeddings(lines, _stand_in_encoder(None, None, None),
                                  IMAGENET_TEMPLATES, 'plain')[0]
    np.testing.assert_allclose(table.embeddings, want, rtol=1e-5, atol=1e-6)
    side = json.load(open(out[:-4] + '.json'))
    assert side['text_model'] == dict(
        name='ViT-B-16',
        weights='w.pt',
        templates='imagenet80',
        templates_sha256=templates_sha256(TEMPLATE_SETS['imagenet80']),
        prompt_style='plain',
        rows_sha256=rows_sha256(np.load(out)))
    # the segmentor of that config accepts the file
    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmseg.registry import MODELS
    cfg = Config.fromfile(config)
    cfg.model.backbone.arch = dict(
        embed_dims=32,
        num_layers=1,
        num_heads=2,
        feedforward_channels=64,
        output_dims=6)
    cfg.model.backbone.init_cfg = None
    cfg.model.text_embeddings = out
    init_default_scope('mmseg')
    model = MODELS.build(cfg.model)
    model.check_classes(cfg.test_dataloader.dataset.metainfo.classes)
    for flags, match in ((['--templates', 'fvit'], '--templates fvit but'),
                         (['--prompt-style',
                           'fvit'], '--prompt-style fvit but'),
                         (['--background'], 'gets its background from')):
        monkeypatch.setattr(
            sys, 'argv',
            ['dump', '--seg-config', config, '--pretrained', 'w.pt', out] +
            flags)
        with pytest.raises(ValueError, match=match):
            tool.main()


def test_seg_config_with_a_misordered_class_name_file(tmp_path, repo_root,
                                                      load_tool, monkeypatch):
    tool = load_tool(TOOL, 'dump_text_emb')
    monkeypatch.setattr(tool, 'open_clip_encoder', _stand_in_encoder)
    names = tmp_path / 'names.txt'
    lines = open(osp.join(repo_root,
                          'configs/last/class_names/voc20.txt')).read()
    lines = lines.split('\n')
    lines[0], lines[1] = lines[1], lines[0]
    names.write_text('\n'.join(lines))
    config = tmp_path / 'cfg.py'
    config.write_text(
        f"_base_ = ['{repo_root}/configs/last/zeroshot_clip-b16_voc20.py']\n"
        f"model = dict(class_name_file='{names}')\n")
    monkeypatch.setattr(sys, 'argv', [
        'dump', '--seg-config',
        str(config), '--pretrained', 'w.pt',
        str(tmp_path / 'o.npy')
    ])
    with pytest.raises(ValueError, match="names.txt:1 lists 'bicycle'"):
        tool.main()
    assert not (tmp_path / 'o.npy').exists()


def _names_refused(tool, names, message, tmp_path, monkeypatch, capsys):
    """``dump --names NAMES`` exits 2 with exactly ``message``."""
    from mmlocat.utils.checkpoint_io import run_cli
    monkeypatch.setattr(sys, 'argv', [
        'dump', '--names',
        str(names), '--pretrained', 'w.pt',
        str(tmp_path / 'x.npy')
    ])
    with pytest.raises(SystemExit) as info:
        run_cli('dump_text_embeddings', tool.main)
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err == f'dump_text_embeddings: error: {message}', err


def test_names_file_latin1_and_duplicates_are_named(tmp_path, load_tool,
                                                    monkeypatch, capsys):
    """A Latin-1 --names file ended in a bare UnicodeDecodeError; a name
    listed twice was refused as 'class_names has duplicates' (which, and
    where?) after the CLIP model was loaded."""
    tool = load_tool(TOOL, 'dump_text_emb')

    def no_encoder(*args):
        raise AssertionError('the names are checked before the model')

    monkeypatch.setattr(tool, 'open_clip_encoder', no_encoder)
    latin = tmp_path / 'latin.txt'
    latin.write_bytes('cat\ncaf\u00e9 table\n'.encode('latin-1'))
    twice = tmp_path / 'twice.json'
    twice.write_text('["cat", "dog", "cat"]')
    for path, message in (
        (latin, f"{latin}:2: bytes b'\\xe9' are not valid utf-8 (invalid "
         'continuation byte); save it as UTF-8 (e.g. iconv -f latin1 -t '
         'utf-8 FILE > NEW_FILE)'),
        (twice, f"{twice}:3: class name 'cat' is listed twice (items 1 and "
         '3); a class is one item: remove one of them'),
    ):
        _names_refused(tool, path, message, tmp_path, monkeypatch, capsys)


def test_names_take_the_one_class_list_grammar(tmp_path, load_tool,
                                               monkeypatch, capsys):
    """Issue 34: ``--names`` read only files ("cat, dog" was a missing
    file); it reads what ``infer.py --classes`` reads."""
    tool = load_tool(TOOL, 'dump_text_emb')
    for names, message in (
        ('cat, dog, cat', "'cat, dog, cat': class name 'cat' is listed "
         'twice (items 1 and 3); a class is one item: remove one of them'),
        ('cat; dog', "'cat; dog': \";\" does not separate class names; "
         'separate them by commas ("cat, remote control")'),
    ):
        _names_refused(tool, names, message, tmp_path, monkeypatch, capsys)


def test_random_text_tower_for_smoke_trials(tmp_path, repo_root, monkeypatch):
    """--random-text-tower: open_clip's random tower, no download; the
    sidecar records no weights and the cache is left alone.
    --cfg-options changes the --seg-config config (its templates here)."""
    model_config = tmp_path / 'tiny-dump-random.json'
    model_config.write_text(
        json.dumps(tiny_open_clip_cfg(embed_dim=8, text_width=16)))
    cache = tmp_path / 'cache'
    monkeypatch.setenv('MMLOCAT_CACHE', str(cache))
    config = osp.join(repo_root, 'configs/last/zeroshot_clip-b16_voc20.py')
    out = str(tmp_path / 'voc20.npy')
    args = ['--seg-config', config, '--model-config', str(model_config)]
    log = run_tool(TOOL, out, *args, '--random-text-tower', '--cfg-options',
                   'model.templates=single').ok()
    assert '30 names, 20 classes, single templates, plain prompts' in log
    side = json.load(open(out[:-4] + '.json'))
    assert side['text_model']['weights'] is None
    assert side['text_model']['templates'] == 'single'
    assert not cache.exists()
    # the options change only a --seg-config config; one weights source
    for argv, message in (
        ([
            out, '--names', 'cat,dog', '--random-text-tower', '--cfg-options',
            'model.templates=single'
        ], 'without one there is nothing'),
        ([out, *args, '--random-text-tower', '--pretrained',
          'w.pt'], 'not allowed with argument'),
        ([
            *args, '--random-text-tower', '--cfg-options',
            'model.templates=single', out
        ], f"'{out}' is not KEY=VALUE"),
    ):
        proc = run_tool(TOOL, *argv)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
