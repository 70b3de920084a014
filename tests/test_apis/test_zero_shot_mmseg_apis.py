"""mmseg's own inference APIs take every shipped zero-shot config.

``mmseg.apis.init_model`` passes ``pretrained=None`` / ``train_cfg=None``
and, for a checkpoint without ``dataset_meta`` (every converted tower),
reads ``decode_head.num_classes`` and guesses the classes;
``inference_model`` runs the config's test pipeline; ``MMSegInferencer``
sets Cityscapes classes for such a checkpoint and draws with the model's
``dataset_meta``. Each config runs with a tiny tower of its type and an
embedding file of its class-name file's queries.
"""
import copy
import glob
import os.path as osp

import numpy as np
import pytest
from mmengine.config import Config

from mmlocat.text import (query_map, save_text_embeddings,
                          zero_shot_class_name_lines, zero_shot_classes)
from mmlocat.utils.checkpoint_io import save_checkpoint

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
CONFIGS = sorted(
    osp.basename(p)
    for p in glob.glob(osp.join(REPO, 'configs', 'last', 'zeroshot_*.py')))
TINY = dict(
    _delete_=True,
    embed_dims=32,
    num_layers=1,
    num_heads=2,
    feedforward_channels=64,
    output_dims=16)


def _tiny(cfg, emb):
    """cfg_options for a tiny tower of the config's type, small windows and
    a small test resolution (the API plumbing is under test here)."""
    pipeline = [
        dict(step, scale=(256, 48)) if step['type'] == 'Resize' else step
        for step in cfg.test_dataloader.dataset.pipeline
    ]
    options = {
        'model.backbone.arch': TINY,
        'model.text_embeddings': emb,
        'model.backbone.init_cfg': None,
        'model.test_cfg': dict(crop_size=(32, 32), stride=(16, 16)),
        'test_pipeline': pipeline,
        'test_dataloader.dataset.pipeline': pipeline
    }
    if cfg.model.backbone.type == 'mmlocat.EVA02CLIPViT':
        options['model.backbone.img_size'] = 32
    return options


def _tower_key(cfg):
    backbone = cfg.model.backbone
    return backbone.type, backbone.get('patch_size')


@pytest.fixture(scope='module')
def files(tmp_path_factory):
    """Per dataset an embedding file (of its class-name file's queries),
    and per tower layout a checkpoint without ``dataset_meta`` (as the
    converters write them), made on first use."""
    root = tmp_path_factory.mktemp('zs_apis')
    made = {}

    def get(cfg, dataset):
        if dataset not in made:
            queries, query_class = query_map(zero_shot_class_name_lines(cfg))
            made[dataset] = save_text_embeddings(
                str(root / f'{dataset}.npy'),
                np.random.default_rng(0).normal(size=(len(queries), 16)),
                queries,
                text_model=dict(templates='imagenet80', prompt_style='plain'),
                query_class=query_class,
                classes=zero_shot_classes(cfg))
        key = _tower_key(cfg)
        if key not in made:
            from mmseg.apis import init_model
            model = init_model(
                copy.deepcopy(cfg),
                device='cpu',
                cfg_options=_tiny(cfg, made[dataset]))
            made[key] = str(root / f'{len(made)}.pth')
            save_checkpoint(
                model.state_dict(),
                made[key],
                meta=dict(note='no dataset_meta'))
        return made[dataset], made[key]

    return get


@pytest.mark.timeout(900)
@pytest.mark.parametrize('name', CONFIGS)
@pytest.mark.slow
def test_init_model_inference_model_and_inferencer(name, files):
    from mmseg.apis import MMSegInferencer, inference_model, init_model
    cfg = Config.fromfile(osp.join(REPO, 'configs', 'last', name))
    emb, ckpt = files(cfg, name[:-3].split('_')[-1])
    cfg.merge_from_dict(_tiny(cfg, emb))
    classes = zero_shot_classes(cfg)
    # a checkpoint without dataset_meta: mmseg guesses, the segmentor keeps
    # its embedding file's classes (and a palette of as many colours)
    # (inference_model edits model.cfg's test pipeline in place)
    model = init_model(copy.deepcopy(cfg), ckpt, device='cpu')
    assert model.dataset_meta['classes'] == classes
    assert len(model.dataset_meta['palette']) == len(classes)
    img = (np.random.default_rng(1).random((40, 52, 3)) * 255).astype(np.uint8)
    sample = inference_model(model, img)
    assert sample.pred_sem_seg.shape == (40, 52)
    assert sample.seg_logits.data.shape == (len(classes), 40, 52)
    # the probabilities of each pixel's classes (max-merged names) <= 1
    assert float(sample.seg_logits.data.sum(0).max()) <= 1 + 1e-5
    inferencer = MMSegInferencer(cfg, weights=ckpt, device='cpu')
    out = inferencer(img, return_vis=True)
    np.testing.assert_array_equal(out['predictions'],
                                  sample.pred_sem_seg.data[0].numpy())
    # the configs' visualizer: mmseg's picture, then a legend strip
    assert type(inferencer.visualizer).__name__ == 'SegLegendVisualizer'
    height, width, _ = out['visualization'].shape
    assert height == 40 and width > 52
