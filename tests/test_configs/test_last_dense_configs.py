"""The LaSt dense-benchmark configs: zero-shot segmentation (Tab. 4),
coarse segmentation (Tab. 6) and CorLoc (Tab. 7) load, are short deltas,
state the protocol, and build (tiny arch override)."""
import glob
import os.path as osp
import re

import numpy as np
import pytest
import torch
from _cfg_diff import diff
from checkpoint_makers import load_config
from helpers.tiny_archs import tiny_vit
from mmengine.config import Config
from mmengine.registry import init_default_scope

from mmlocat.text import (query_map, read_class_name_file,
                          save_text_embeddings, zero_shot_class_name_lines,
                          zero_shot_classes)

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
LAST = osp.join(REPO, 'configs', 'last')
CLASS_NAMES = osp.join(LAST, 'class_names')
# tower -> (backbone type, arch, checkpoint stem of the baseline / LaSt)
TOWERS = {
    'clip-b16': ('mmlocat.CLIPViT', 'b', 'clip-vit-b16'),
    'clip-l14': ('mmlocat.CLIPViT', 'l', 'clip-vit-l14'),
    'eva02-clip-b16': ('mmlocat.EVA02CLIPViT', 'b', 'eva02-clip-b16'),
    'eva02-clip-l14-336': ('mmlocat.EVA02CLIPViT', 'l', 'eva02-clip-l14-336'),
    'metaclip-b16': ('mmlocat.CLIPViT', 'b', 'metaclip-b16-fullcc'),
    'metaclip-l14': ('mmlocat.CLIPViT', 'l', 'metaclip-l14-fullcc'),
}
# towers with a same-recipe CLS twin (configs/last/clip_cls-*)
CLS_TWINS = ('clip-b16', 'clip-l14', 'eva02-clip-b16', 'eva02-clip-l14-336')
OPENAI_MEAN = [122.771, 116.746, 104.094]
OPENAI_STD = [68.501, 66.632, 70.323]
# dataset -> (mmseg dataset type, SCLIP's Resize short side (cfg_*.py),
# classes, query names of SCLIP's class-name file, logit scale, prob_thd)
DATASETS = {
    'coco-object': ('mmlocat.COCOObjectDataset', 336, 81, 113, 50, 0.1),
    'ade20k': ('ADE20KDataset', 336, 150, 150, 40, 0.),
    'cityscapes': ('CityscapesDataset', 560, 19, 19, 40, 0.),
    'voc20': ('PascalVOCDataset', 336, 20, 30, 40, 0.),
    'pascal-context-59': ('PascalContextDataset59', 336, 59, 59, 40, 0.),
    'coco-stuff164k': ('COCOStuffDataset', 448, 171, 171, 40, 0.),
}
# mmlocat's earlier protocol (_base_/zeroshot_<dataset>_mmlocat.py):
# short side, classes (without a text background)
EARLIER = {
    'coco-object': (336, 80),
    'ade20k': (448, 150),
    'cityscapes': (560, 19),
    'voc20': (336, 20),
    'pascal-context-59': (336, 59),
    'coco-stuff164k': (336, 171),
}
ZERO_SHOT = [(t, d) for t in TOWERS for d in DATASETS]


def _load(name):
    return load_config(osp.join(LAST, name))


def _without_last_parts(cfg):
    text = dict(cfg.to_dict())
    text['model']['backbone']['init_cfg'].pop('checkpoint')
    text['model'].pop('text_embeddings')
    return text


def test_every_combination_exists_and_nothing_else():
    found = sorted(
        osp.basename(p) for p in glob.glob(osp.join(LAST, 'zeroshot_*.py')))
    expected = sorted([
        f'zeroshot_{p}{t}_{d}.py' for t, d in ZERO_SHOT for p in ('', 'last-')
    ] + [f'zeroshot_cls-{t}_{d}.py' for t, d in ZERO_SHOT if t in CLS_TWINS])
    assert found == expected and len(found) == 96


@pytest.mark.parametrize('tower, dataset', ZERO_SHOT)
@pytest.mark.slow
def test_zero_shot_config(tower, dataset):
    """SCLIP's protocol, value by value (clip_segmentor.py, cfg_*.py)."""
    cfg = _load(f'zeroshot_{tower}_{dataset}.py')
    twin = _load(f'zeroshot_last-{tower}_{dataset}.py')
    model = cfg.model
    backbone_type, arch, stem = TOWERS[tower]
    data_type, short_side, num_classes, num_queries, scale, prob_thd = \
        DATASETS[dataset]
    assert cfg.default_scope == 'mmseg'
    assert model.type == 'mmlocat.ZeroShotSegmentor'
    assert model.backbone.type == backbone_type
    assert model.backbone.arch == arch
    assert model.backbone.init_cfg.checkpoint == \
        f'checkpoints/{stem}_mmlocat.pth'
    # OpenAI's mean / std for every tower, EVA02-CLIP and MetaCLIP included
    assert model.data_preprocessor.mean == OPENAI_MEAN
    assert model.data_preprocessor.std == OPENAI_STD
    assert model.data_preprocessor.bgr_to_rgb
    assert model.feature_tap == 'last'
    assert (model.templates, model.prompt_style) == ('imagenet80', 'plain')
    assert model.logit_scale == scale
    assert model.get('prob_thd', 0.) == prob_thd
    assert model.get('bg_thresh') is None
    # window 224, stride 112 for every tower (SCLIP's slide_crop / stride)
    assert model.test_cfg == dict(
        mode='slide', crop_size=(224, 224), stride=(112, 112))
    assert model.text_embeddings == f'data/embeddings/{dataset}_{tower}.npy'
    assert model.backbone.init_cfg.prefix == 'backbone.'
    assert osp.normpath(model.class_name_file) == osp.join(
        CLASS_NAMES, f'{dataset}.txt')
    assert cfg.custom_hooks == [dict(type='mmlocat.ZeroShotClassCheckHook')]
    data = cfg.test_dataloader.dataset
    assert data.type == data_type
    assert cfg.test_dataloader.batch_size == 1
    resize = [(s['scale'], s['keep_ratio']) for s in data.pipeline
              if s['type'] == 'Resize']
    assert resize == [((2048, short_side), True)]
    assert cfg.get('train_dataloader') is None
    assert cfg.get('val_dataloader') is None
    classes = zero_shot_classes(cfg)
    assert len(classes) == num_classes
    lines = zero_shot_class_name_lines(cfg)  # checked against the classes
    assert sum(len(names) for names in lines) == num_queries
    # The LaSt twin: its checkpoint and its text tower's embeddings only.
    assert twin.model.backbone.init_cfg.checkpoint == \
        f'checkpoints/last-{stem}_mmlocat.pth'
    assert twin.model.text_embeddings == \
        f'data/embeddings/{dataset}_last-{tower}.npy'
    assert _without_last_parts(twin) == _without_last_parts(cfg)
    # The same-recipe CLS twin (configs/last/clip_cls-*): its checkpoint and
    # embedding file only.
    if tower in CLS_TWINS:
        cls = _load(f'zeroshot_cls-{tower}_{dataset}.py')
        assert cls.model.backbone.init_cfg.checkpoint == \
            f'checkpoints/cls-{stem}_mmlocat.pth'
        assert cls.model.text_embeddings == \
            f'data/embeddings/{dataset}_cls-{tower}.npy'
        assert _without_last_parts(cls) == _without_last_parts(cfg)


def test_coco_object_reads_coco_stuff_conversions():
    data = _load('zeroshot_clip-b16_coco-object.py').test_dataloader.dataset
    assert data.data_root == 'data/coco_stuff164k'
    assert data.data_prefix == dict(
        img_path='images/val2017', seg_map_path='coco_object/val2017')
    assert data.get('reduce_zero_label', False) is False


@pytest.mark.parametrize('dataset', list(DATASETS))
def test_earlier_protocol_bases(dataset, tmp_path):
    """mmlocat's earlier choices stay a swap of the dataset base away."""
    leaf = tmp_path / 'leaf.py'
    leaf.write_text(f"""
_base_ = ['{LAST}/_base_/zeroshot_clip-b16.py',
          '{LAST}/_base_/zeroshot_{dataset}_mmlocat.py']
model = dict(text_embeddings='e.npy', **_base_.zero_shot_dataset)
""")
    cfg = Config.fromfile(str(leaf))
    short_side, num_classes = EARLIER[dataset]
    model = cfg.model
    assert model.class_name_file is None and model.logit_scale == 100
    assert model.get('prob_thd', 0.) == 0
    resize = [
        s['scale'] for s in cfg.test_dataloader.dataset.pipeline
        if s['type'] == 'Resize'
    ]
    assert resize == [(2048, short_side)]
    classes = zero_shot_classes(cfg)
    assert len(classes) == num_classes
    assert zero_shot_class_name_lines(cfg) == [[c] for c in classes]
    if dataset == 'coco-object':
        assert model.bg_thresh == 0.5
        data = cfg.test_dataloader.dataset
        assert data.data_root == 'data/coco'
        assert data.data_prefix.seg_map_path == 'coco_object/val2017'
    else:
        assert model.get('bg_thresh') is None


def test_class_name_files_are_sclips():
    """The shipped files: SCLIP's / NACLIP's bytes (sha256) and its quirks
    named in class_names/README.md."""
    import hashlib
    expected = {
        'ade20k': 'e53ded02c488bdb903ef000a2d207e4a',
        'cityscapes': '6f6782fc1bf92bfd9f5562192e92045e',
        'coco-object': '3475d03d61f85ce03812ce62d019de8f',
        'coco-stuff164k': 'fb98709b9ab1baff4fd930bac4a77772',
        'pascal-context-59': 'cd808465f06a16169edc25580073f0ed',
        'voc20': 'c68f65a2b342397cdfe05ff5289517e1',
    }
    for name, digest in expected.items():
        with open(osp.join(CLASS_NAMES, f'{name}.txt'), 'rb') as f:
            assert hashlib.sha256(f.read()).hexdigest()[:32] == digest, name
    lines = read_class_name_file(osp.join(CLASS_NAMES, 'coco-object.txt'))
    assert len(lines[0]) == 26 and 'bed' in lines[0] and lines[60] == ['bed']
    voc = read_class_name_file(osp.join(CLASS_NAMES, 'voc20.txt'))
    assert voc[3] == ['ship'] and len(voc[14]) == 7 and len(voc[19]) == 5
    assert osp.isfile(osp.join(CLASS_NAMES, 'LICENSE'))


def test_readme_protocol_table_names_sclip_for_every_row():
    with open(osp.join(LAST, 'README.md'), encoding='utf-8') as f:
        text = f.read()
    start = text.index('| What | SCLIP (default) |')
    rows = text[start:].split('\n\n')[0].splitlines()[2:]
    assert len(rows) >= 12
    for row in rows:
        cells = [c.strip() for c in row.strip('|').split('|')]
        what, sclip, earlier, where = cells[:4]
        assert sclip and earlier, row
        assert re.search(r'\w+\.(py|txt)(:\d+(-\d+)?)?', where), row


@pytest.mark.parametrize('tower', list(TOWERS))
def test_zero_shot_builds(tower, tmp_path):
    """Each tower base builds with a tiny arch and its dataset's classes."""
    from mmseg.registry import MODELS
    cfg = _load(f'zeroshot_{tower}_voc20.py')
    tiny = dict(
        embed_dims=32,
        num_layers=2,
        num_heads=2,
        feedforward_channels=64,
        output_dims=16)
    if cfg.model.backbone.type == 'mmlocat.EVA02CLIPViT':
        tiny.update(patch_size=16, img_size=32)
    emb = str(tmp_path / 'e.npy')
    queries, query_class = query_map(zero_shot_class_name_lines(cfg))
    save_text_embeddings(
        emb,
        np.random.default_rng(0).normal(size=(len(queries), 16)),
        queries,
        query_class=query_class,
        classes=zero_shot_classes(cfg))
    cfg.model.backbone.arch = tiny
    cfg.model.backbone.init_cfg = None
    cfg.model.text_embeddings = emb
    cfg.model.classes = cfg.test_dataloader.dataset.metainfo.classes
    init_default_scope('mmseg')
    model = MODELS.build(cfg.model).eval()
    with torch.no_grad():
        cosines = model.inference(
            torch.rand(1, 3, 48, 64), [dict(ori_shape=(48, 64))])
        samples = model.predict(torch.rand(1, 3, 48, 64))
    assert cosines.shape == (1, 30, 48, 64)
    assert samples[0].seg_logits.shape == (48, 64)
    assert samples[0].seg_logits.data.shape[0] == 20


COARSE = ('coarseseg_last-dino-s_voc12.py', 'coarseseg_dino-s_voc12.py',
          'coarseseg_last-s_voc12.py', 'coarseseg_vit-s_voc12.py',
          'coarseseg_last-b_voc12.py', 'coarseseg_vit-b_voc12.py')


@pytest.mark.parametrize('name', COARSE)
def test_coarse_seg_config(name):
    cfg = _load(name)
    backbone = cfg.model.backbone
    assert cfg.model.type == 'mmlocat.PatchScoreClassifier'
    assert backbone.pooling == ('lazy_strike' if 'last' in name else 'cls')
    assert backbone.arch == ('b' if '-b_' in name else 'deit-small')
    dino = 'dino' in name
    assert backbone.pos_embed_cfg == dict(resample='dino' if dino else 'host')
    # LOST's geometry for every tower: zero padding to a multiple of 16
    assert backbone.patch_cfg == dict(padding='corner')
    assert cfg.test_evaluator == [
        dict(type='mmlocat.CoarseSegIoU', patch_size=16)
    ]
    data = cfg.test_dataloader.dataset
    assert data.type == 'mmseg.PascalVOCDataset'
    assert data.ann_file == 'ImageSets/Segmentation/val.txt'
    assert [s['type'] for s in data.pipeline] == [
        'LoadImageFromFile', 'mmseg.LoadAnnotations',
        'mmlocat.CheckAnnotatedSize', 'PackInputs'
    ]
    assert data.pipeline[0]['color_type'] == 'color_ignore_orientation'
    _assert_padded_grid(cfg)


def _assert_padded_grid(cfg):
    """A 375x500 VOC image gives LOST's 24x32 grid (not 23x31)."""
    from mmpretrain.registry import MODELS
    init_default_scope('mmpretrain')
    cfg.model.backbone.arch = tiny_vit(num_layers=1)
    cfg.model.backbone.init_cfg = None
    model = MODELS.build(cfg.model).eval()
    with torch.no_grad():
        (pred, ) = model.predict(torch.rand(1, 3, 375, 500))
    assert pred.patch_score.shape == (24, 32)


CORLOC = {
    'voc07': ('mmlocat.ImageNetLocDataset', 'data/VOCdevkit/VOC2007', 5011),
    'voc12': ('mmlocat.ImageNetLocDataset', 'data/VOCdevkit/VOC2012', 11540),
    'coco20k': ('mmlocat.CocoBoxesDataset', 'data/coco', 19817),
}


@pytest.mark.parametrize('dataset', list(CORLOC))
@pytest.mark.parametrize('weights', ['dino', 'last-dino0080'])
def test_corloc_configs(dataset, weights):
    """LOST's evaluation: padded full-resolution input, PIL decoding
    without EXIF rotation checked against the annotated size, every image
    of the protocol's set, the seed's 4-connected component; COCO20k boxes
    rounded. The released-weights twin changes only the checkpoint."""
    cfg = _load(f'corloc_{weights}-s_{dataset}.py')
    base = _load('corloc_dino-s_voc07.py')
    data_type, root, count = CORLOC[dataset]
    backbone = cfg.model.backbone
    assert backbone.patch_cfg == dict(padding='corner')
    assert backbone.pos_embed_cfg == dict(resample='dino')
    assert backbone.pooling == 'lazy_strike'
    assert cfg.test_evaluator == [
        dict(
            type='mmlocat.CorLoc',
            patch_size=16,
            iou_thr=0.5,
            component='seed',
            connectivity=4)
    ]
    data = cfg.test_dataloader.dataset
    assert data.type == data_type and data.data_root == root
    assert data.expected_num_images == count
    assert data.get('without_boxes', 'error') == 'error'
    assert data.get('round_boxes', False) == (dataset == 'coco20k')
    assert data.get('filter_single_small') in (None, False)
    assert data.get('skip_difficult', False) is False  # every VOC object
    assert data.pipeline == base.test_pipeline == [
        dict(
            type='LoadImageFromFile',
            color_type='color_ignore_orientation',
            imdecode_backend='pillow'),
        dict(type='mmlocat.CheckAnnotatedSize'),
        dict(type='PackInputs', algorithm_keys=('gt_bboxes', )),
    ]
    if weights == 'dino':
        assert cfg.model == base.model
        _assert_padded_grid(cfg)
    else:
        twin = _load(f'corloc_dino-s_{dataset}.py').to_dict()
        changed = diff(twin, cfg.to_dict())
        init = {
            'type.': 'Pretrained',
            'checkpoint.': 'checkpoints/last-dino0080-s_mmlocat.pth',
            'prefix.': 'backbone.'
        }
        assert changed == {
            **{
                f'model.backbone.init_cfg.{k}': (None, v)
                for k, v in init.items()
            },
            **{
                f'last_dino0080_init.{k}': (None, v)
                for k, v in init.items()
            }
        }
