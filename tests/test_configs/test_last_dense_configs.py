"""The LaSt dense-benchmark configs: zero-shot segmentation (Tab. 4),
coarse segmentation (Tab. 6) and CorLoc (Tab. 7) load, are short deltas,
state the protocol, and build (tiny arch override)."""
import glob
import os.path as osp

import numpy as np
import pytest
import torch
from _cfg_diff import diff
from mmengine.config import Config
from mmengine.registry import init_default_scope

from mmlocat.datasets.text_embeddings import (config_class_names,
                                              save_text_embeddings)

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
LAST = osp.join(REPO, 'configs', 'last')
TOWERS = {
    'clip-b16': ('mmlocat.CLIPViT', 'b', 224),
    'clip-l14': ('mmlocat.CLIPViT', 'l', 224),
    'eva02-clip-b16': ('mmlocat.EVA02CLIPViT', 'b', 224),
    'eva02-clip-l14-336': ('mmlocat.EVA02CLIPViT', 'l', 336),
}
# dataset -> (mmseg dataset type, Resize short side, number of classes)
DATASETS = {
    'coco-object': ('mmlocat.COCOObjectDataset', 336, 80),
    'ade20k': ('ADE20KDataset', 448, 150),
    'cityscapes': ('CityscapesDataset', 560, 19),
    'voc20': ('PascalVOCDataset', 336, 20),
    'pascal-context-59': ('PascalContextDataset59', 336, 59),
    'coco-stuff164k': ('COCOStuffDataset', 336, 171),
}
ZERO_SHOT = [(t, d) for t in TOWERS for d in DATASETS]


def _load(name):
    return Config.fromfile(osp.join(LAST, name))


def _without_checkpoint(cfg):
    text = dict(cfg.to_dict())
    text['model']['backbone']['init_cfg'].pop('checkpoint')
    return text


def test_every_combination_exists_and_nothing_else():
    found = sorted(
        osp.basename(p) for p in glob.glob(osp.join(LAST, 'zeroshot_*.py')))
    expected = sorted(f'zeroshot_{p}{t}_{d}.py' for t, d in ZERO_SHOT
                      for p in ('', 'last-', 'cls-'))
    assert found == expected and len(found) == 72


@pytest.mark.parametrize('tower, dataset', ZERO_SHOT)
def test_zero_shot_config(tower, dataset):
    cfg = _load(f'zeroshot_{tower}_{dataset}.py')
    twin = _load(f'zeroshot_last-{tower}_{dataset}.py')
    model = cfg.model
    backbone_type, arch, window = TOWERS[tower]
    data_type, short_side, num_classes = DATASETS[dataset]
    assert cfg.default_scope == 'mmseg'
    assert model.type == 'mmlocat.ZeroShotSegmentor'
    assert model.backbone.type == backbone_type
    assert model.backbone.arch == arch
    assert model.feature_tap == 'last' and model.logit_scale == 100
    assert model.test_cfg == dict(
        mode='slide', crop_size=(window, window), stride=(112, 112))
    assert model.text_embeddings == f'data/embeddings/{dataset}_{tower}.npy'
    assert model.backbone.init_cfg.prefix == 'backbone.'
    assert (model.get('bg_thresh') is not None) == (dataset == 'coco-object')
    assert cfg.custom_hooks == [dict(type='mmlocat.ZeroShotClassCheckHook')]
    data = cfg.test_dataloader.dataset
    assert data.type == data_type
    resize = [(s['scale'], s['keep_ratio']) for s in data.pipeline
              if s['type'] == 'Resize']
    assert resize == [((2048, short_side), True)]
    assert cfg.get('train_dataloader') is None
    assert cfg.get('val_dataloader') is None
    assert len(config_class_names(cfg)) == num_classes
    # The LaSt twin differs in the checkpoint only, and so does its
    # same-recipe CLS twin (configs/last/clip_cls-*).
    assert twin.model.backbone.init_cfg.checkpoint.startswith(
        'checkpoints/last-')
    assert _without_checkpoint(twin) == _without_checkpoint(cfg)
    cls = _load(f'zeroshot_cls-{tower}_{dataset}.py')
    assert cls.model.backbone.init_cfg.checkpoint == \
        twin.model.backbone.init_cfg.checkpoint.replace(
            'checkpoints/last-', 'checkpoints/cls-')
    assert _without_checkpoint(cls) == _without_checkpoint(cfg)


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
    names = config_class_names(cfg)
    save_text_embeddings(
        emb,
        np.random.default_rng(0).normal(size=(len(names), 16)), names)
    cfg.model.backbone.arch = tiny
    cfg.model.backbone.init_cfg = None
    cfg.model.text_embeddings = emb
    cfg.model.classes = cfg.test_dataloader.dataset.metainfo.classes
    init_default_scope('mmseg')
    model = MODELS.build(cfg.model).eval()
    with torch.no_grad():
        logits = model.inference(
            torch.rand(1, 3, 48, 64), [dict(ori_shape=(48, 64))])
    assert logits.shape == (1, 20, 48, 64)


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
    assert backbone.pos_embed_resample == ('dino' if dino else 'host')
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
    cfg.model.backbone.arch = dict(
        embed_dims=32, num_layers=1, num_heads=2, feedforward_channels=64)
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
    assert backbone.pos_embed_resample == 'dino'
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
