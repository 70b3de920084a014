"""The shipped zero-shot configs predict what SCLIP's evaluator predicts.

A random-init open_clip ``ViT-B-16-quickgelu`` (the image tower exactly;
the text tower narrowed to one 32-wide block over 32 tokens, its token
embeddings drawn 10x wider so that the class names, not the 80 shared
template words, set the text embeddings apart) is saved as a user's
weights file. mmlocat's side is what a user runs: ``clip2mmlocat.py``
converts the image tower, ``dump_text_embeddings.py --seg-config`` writes
the query embeddings from the config's class-name file, and the shipped
config (dataset, pipeline, data preprocessor, segmentor) predicts on
generated data in the real layouts. SCLIP's side is
:mod:`helpers.sclip_reference`, a transcription of its evaluator written
from SCLIP's code, on the open_clip model itself. Label maps must agree on
>= 99.9 % of the pixels of each dataset, and SCLIP's maps must not be
trivial (several classes; for COCO-Object background by the threshold and
objects).

open_clip's tokenizer (pure Python, the slow part) is memoised for the
module: both sides tokenise the same prompts with it.
"""
import importlib.util
import json
import os.path as osp
import sys

import pytest
import torch
from helpers import sclip_reference as sclip
from mmengine.config import Config
from mmengine.dataset import pseudo_collate
from mmengine.registry import init_default_scope

from mmlocat.testing import generate

MODEL = 'sclip-parity-b16'
# (shipped config, generator kind, SCLIP's short side (cfg_*.py:14/16),
# logit scale, prob_thd (cfg_coco_object.py:6-7))
DATASETS = {
    'voc20': ('zeroshot_clip-b16_voc20.py', 'pascal_voc', 336, 40, 0.),
    'pascal-context-59':
    ('zeroshot_clip-b16_pascal-context-59.py', 'pascal_context', 336, 40, 0.),
    'coco-object':
    ('zeroshot_clip-b16_coco-object.py', 'coco_object_stuff', 336, 50, 0.1),
}
MIN_AGREEMENT = 0.999
# one image per dataset, resized to 336 x 336: 2 x 2 windows of 224
IMG_SIZE = (360, 360)


def _load_tool(repo_root, rel, name):
    spec = importlib.util.spec_from_file_location(name,
                                                  osp.join(repo_root, rel))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run_tool(module, monkeypatch, *argv):
    monkeypatch.setattr(sys, 'argv', ['tool', *map(str, argv)])
    module.main()


@pytest.fixture(scope='module')
def memo_tokenizer():
    """open_clip's tokenizer, memoised per prompt list."""
    from open_clip.tokenizer import SimpleTokenizer
    call, memo = SimpleTokenizer.__call__, {}

    def memoised(self, texts, context_length=None):
        key = (id(self.encoder), context_length or self.context_length,
               tuple([texts] if isinstance(texts, str) else texts))
        if key not in memo:
            memo[key] = call(self, texts, context_length)
        return memo[key].clone()

    mp = pytest.MonkeyPatch()
    mp.setattr(SimpleTokenizer, '__call__', memoised)
    yield
    mp.undo()


@pytest.fixture(scope='module')
def clip_files(tmp_path_factory, memo_tokenizer):
    """The open_clip model (image tower ViT-B/16 exactly, text tower
    narrowed), its weights file and model-config file."""
    import open_clip
    root = tmp_path_factory.mktemp('sclip_clip')
    cfg = dict(open_clip.get_model_config('ViT-B-16-quickgelu'))
    assert cfg['vision_cfg'] == dict(
        image_size=224, layers=12, width=768, patch_size=16)
    cfg['text_cfg'] = dict(
        context_length=32, vocab_size=49408, width=32, heads=2, layers=1)
    cfg_file = root / f'{MODEL}.json'
    cfg_file.write_text(json.dumps(cfg))
    open_clip.add_model_config(str(cfg_file))
    torch.manual_seed(0)
    model = open_clip.create_model(MODEL, pretrained=None).eval()
    with torch.no_grad():
        model.token_embedding.weight.mul_(10)
    weights = root / 'weights.bin'
    torch.save(model.state_dict(), weights)
    return dict(
        model=model,
        tokenizer=open_clip.get_tokenizer(MODEL),
        cfg_file=str(cfg_file),
        weights=str(weights),
        root=root)


@pytest.fixture(scope='module')
def tower_checkpoint(clip_files, repo_root):
    """The image tower converted by the real converter tool."""
    mp = pytest.MonkeyPatch()
    out = clip_files['root'] / 'tower_mmlocat.pth'
    tool = _load_tool(repo_root, 'tools/model_converters/clip2mmlocat.py',
                      'clip2mmlocat_parity')
    try:
        _run_tool(tool, mp, clip_files['weights'], out, '--model-config',
                  clip_files['cfg_file'])
    finally:
        mp.undo()
    return str(out)


def _mmlocat_label_maps(repo_root, config, paths, emb, ckpt):
    """Label maps of the shipped config, as tools/test.py builds it."""
    from mmseg.registry import DATASETS, MODELS
    cfg = Config.fromfile(config)
    cfg.model.text_embeddings = emb
    cfg.model.backbone.init_cfg.checkpoint = ckpt
    data = cfg.test_dataloader.dataset
    data.data_root = paths['data_root']
    if 'val_seg_dir' in paths:
        data.data_prefix = dict(
            img_path=paths['val_img_dir'], seg_map_path=paths['val_seg_dir'])
    init_default_scope('mmseg')
    model = MODELS.build(cfg.model)
    model.init_weights()  # the Pretrained tower, strictly
    model.eval()
    dataset = DATASETS.build(data)
    model.check_classes(dataset.metainfo['classes'])
    maps = {}
    for i in range(len(dataset)):
        batch = pseudo_collate([dataset[i]])
        sample = model.test_step(batch)[0]
        maps[sample.img_path] = sample.pred_sem_seg.data[0]
    return maps


@pytest.mark.timeout(900)
@pytest.mark.parametrize('dataset', list(DATASETS))
@pytest.mark.slow
def test_shipped_config_agrees_with_sclip(dataset, clip_files,
                                          tower_checkpoint, repo_root,
                                          tmp_path, monkeypatch):
    config_name, kind, short_side, scale, prob_thd = DATASETS[dataset]
    config = osp.join(repo_root, 'configs', 'last', config_name)
    cfg = Config.fromfile(config)
    # the protocol under test is SCLIP's, read from the shipped config
    name_file = cfg.model.class_name_file
    assert cfg.model.logit_scale == scale and cfg.model.get('prob_thd',
                                                            0.) == prob_thd
    assert [
        s['scale'] for s in cfg.test_dataloader.dataset.pipeline
        if s['type'] == 'Resize'
    ] == [(2048, short_side)]
    paths = generate(kind, str(tmp_path / 'data'), 1, 1, IMG_SIZE)

    emb = str(tmp_path / 'emb.npy')
    dump = _load_tool(repo_root, 'tools/misc/dump_text_embeddings.py',
                      'dump_parity')
    _run_tool(dump, monkeypatch, '--seg-config', config, '--model-config',
              clip_files['cfg_file'], '--pretrained', clip_files['weights'],
              emb)
    ours = _mmlocat_label_maps(repo_root, config, paths, emb, tower_checkpoint)

    model, tokenizer = clip_files['model'], clip_files['tokenizer']
    words, query_idx = sclip.get_cls_idx(name_file)
    feats = sclip.query_features(model, tokenizer, words)
    same = total = background = same_other_rule = 0
    labels = set()
    # one name per class (each class's first), no threshold, scale 100:
    # a rule the comparison must be able to tell apart where synonyms exist
    num_classes = max(query_idx) + 1
    first = [query_idx.index(k) for k in range(num_classes)]
    for img_path, our_map in sorted(ours.items()):
        cosines = sclip.sclip_cosines(model, feats, img_path, short_side)
        ref = sclip.postprocess(cosines, query_idx, scale, prob_thd)
        assert ref.shape == our_map.shape == IMG_SIZE
        same += int((ref == our_map).sum())
        total += ref.numel()
        other = sclip.postprocess(cosines[:, first], list(range(num_classes)),
                                  100, 0.)
        same_other_rule += int((other == our_map).sum())
        labels |= set(ref.unique().tolist())
        background += int((ref == 0).sum())
    agreement = same / total
    print(f'\n{dataset}: {agreement:.6f} of {total} pixels agree; SCLIP '
          f'predicts labels {sorted(labels)}; one name per class at scale '
          f'100 would agree on {same_other_rule / total:.6f}')
    assert agreement >= MIN_AGREEMENT, (dataset, agreement)
    # not a degenerate comparison: SCLIP's maps use several classes (and
    # on COCO-Object both the background threshold and objects)
    assert len(labels) >= 3, labels
    if prob_thd:
        assert 0.01 < background / total < 0.99, background / total
    if len(words) > num_classes:
        assert same_other_rule / total < MIN_AGREEMENT, same_other_rule
