"""The shipped PiB / CorLoc configs load and build (tiny arch override)."""
import os.path as osp

import pytest
import torch
from _cfg_diff import diff
from checkpoint_makers import load_config
from helpers.tiny_archs import tiny_vit
from mmengine.registry import init_default_scope

CONFIGS = ('pib_last-b_in1k.py', 'pib_vit-b_in1k.py', 'corloc_dino-s_voc07.py')
TINY = tiny_vit(num_layers=1)


@pytest.mark.parametrize('name', CONFIGS)
def test_config_loads_and_builds(name, repo_root):
    cfg = load_config(osp.join(repo_root, 'configs', 'last', name))
    assert cfg.default_scope == 'mmpretrain'
    assert cfg.custom_imports['imports'] == ['mmlocat']
    assert cfg.model.type == 'mmlocat.PatchScoreClassifier'
    assert 'ViTInit' not in str(cfg.model.backbone.get('init_cfg'))
    metric_types = [m['type'] for m in cfg.test_evaluator]
    expected_metric = 'mmlocat.CorLoc' if 'corloc' in name else (
        'mmlocat.PointInBox')
    assert metric_types == [expected_metric]
    pipeline = [t['type'] for t in cfg.test_dataloader.dataset.pipeline]
    if name.startswith('pib'):
        assert cfg.test_dataloader.dataset.filter_single_small
        assert pipeline == [
            'LoadImageFromFile', 'mmlocat.ResizeEdgeWithBoxes', 'CenterCrop',
            'PackInputs'
        ]
    assert cfg.model.backbone.type == 'mmlocat.LaStViT'
    if name.startswith('pib'):  # the A/B is one option
        assert cfg.model.backbone.pooling == ('cls' if 'vit-b' in name else
                                              'lazy_strike')

    from mmpretrain.registry import MODELS
    init_default_scope('mmpretrain')
    cfg.model.backbone.arch = TINY
    if cfg.model.head is not None:
        cfg.model.head.in_channels = 32
    model = MODELS.build(cfg.model).eval()
    with torch.no_grad():
        (pred, ) = model.predict(torch.rand(1, 3, 224, 224))
    assert pred.patch_score.shape == (14, 14)


def _diff(repo_root, a, b):
    folder = osp.join(repo_root, 'configs', 'last')
    return diff(*(load_config(osp.join(folder, name)).to_dict()
                  for name in (a, b)))


@pytest.mark.parametrize('protocol', ['', '_public'])
def test_pib_twins_differ_only_in_the_backbone(repo_root, protocol):
    """LaSt-ViT vs plain ViT-B/16: one protocol, one backbone class, the
    pooling option (and its LazyStrike arguments) only."""
    diff = _diff(repo_root, f'pib_vit-b_in1k{protocol}.py',
                 f'pib_last-b_in1k{protocol}.py')
    expected = {
        'model.backbone.pooling.': ('cls', 'lazy_strike'),
        'model.backbone.topk.': (None, 1),
    }
    if protocol:  # the public script scores against the CLS output
        expected['model.backbone.score_query.'] = (None, 'cls')
    assert diff == expected


@pytest.mark.parametrize('model', ['last', 'vit'])
def test_pib_public_protocol_changes_only_the_test_side(repo_root, model):
    diff = _diff(repo_root, f'pib_{model}-b_in1k.py',
                 f'pib_{model}-b_in1k_public.py')
    if model == 'last':  # LaSt scores against the CLS output, as the script
        assert diff.pop('model.backbone.score_query.') == (None, 'cls')
    changed = {k.split('.')[0] for k in diff}
    assert changed == {'test_pipeline', 'test_dataloader', 'test_evaluator'}
    assert diff['test_dataloader.dataset.one_based.'] == (None, False)
    assert diff['test_evaluator.0.protocol.'] == (None, 'public')
