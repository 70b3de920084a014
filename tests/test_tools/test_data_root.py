"""``--data-root DIR``: one flag points any config at a data folder
(mmlocat.utils.data_root.retarget_data_root), and the tiny-data command
writes the layout the shipped configs read."""
import os.path as osp

import pytest
from helpers.harness import run_tool
from mmengine.config import Config

from mmlocat.testing import DEFAULT_SUBDIRS, generate
from mmlocat.utils.data_root import retarget_data_root
from mmlocat.utils.launch import load_config

# one config per family whose data the tiny-data command writes
FAMILIES = [
    'configs/locat/upernet_locat-t_ade20k.py',
    'configs/locat/upernet_locat-t_coco-stuff164k.py',
    'configs/locat/upernet_locat-t_pascal-context-59.py',
    'configs/locat/probe_locat-t_ade20k.py',
    'configs/locat/locat-t_8xb128_in1k.py',
    'configs/last/upernet_last-b_ade20k.py',
    'configs/last/last-b_8xb512_in1k.py',
    'configs/last/pib_last-b_in1k.py',
    'configs/last/coarseseg_last-s_voc12.py',
    'configs/last/corloc_dino-s_voc07.py',
    'configs/last/corloc_dino-s_voc12.py',
    'configs/last/zeroshot_clip-b16_voc20.py',
    'configs/last/zeroshot_clip-b16_ade20k.py',
    'configs/last/zeroshot_clip-b16_cityscapes.py',
    'configs/last/zeroshot_clip-b16_coco-object.py',
    'configs/last/zeroshot_clip-b16_coco-stuff164k.py',
    'configs/last/zeroshot_clip-b16_pascal-context-59.py',
    'configs/ovd/fvit_clip-b16_ov-coco.py',
    'configs/ovd/fvit_clip-b16_ov-lvis.py',
]
KINDS = ('ade20k', 'coco_stuff', 'pascal_context', 'pascal_voc',
         'pascal_voc07', 'cityscapes', 'coco', 'lvis', 'imagenet',
         'coco_object', 'coco_object_stuff')


@pytest.fixture(scope='module')
def tiny_root(tmp_path_factory):
    """What ``make_tiny_datasets.py --root ROOT`` writes."""
    root = str(tmp_path_factory.mktemp('tiny_data'))
    for kind in KINDS:
        generate(kind, osp.join(root, DEFAULT_SUBDIRS[kind]), 2, 1, (32, 32))
    return root


def _datasets(node):
    if isinstance(node, dict):
        for key in ('dataset', 'datasets'):
            inner = node.get(key)
            for item in inner if isinstance(inner, list) else [inner]:
                yield from _datasets(item)
        if 'data_root' in node or 'ann_file' in node:
            yield node


def _dataset_paths(cfg):
    """(what, path) of every file or folder the datasets and evaluators
    name."""
    out = []
    for split in ('train', 'val', 'test'):
        loader = cfg.get(f'{split}_dataloader', None)
        for ds in _datasets(loader.dataset if loader else None):
            root = ds.get('data_root', '') or ''
            out.append((f'{split} data_root', root))
            if ds.get('ann_file'):
                out.append((f'{split} ann_file', osp.join(root, ds.ann_file)))
            prefix = ds.get('data_prefix') or {}
            if isinstance(prefix, str):
                prefix = dict(prefix=prefix)
            out += [(f'{split} data_prefix.{k}', osp.join(root, v))
                    for k, v in prefix.items() if v]
        evaluators = cfg.get(f'{split}_evaluator', None) or []
        for ev in evaluators if isinstance(evaluators, list) else [evaluators]:
            if ev.get('ann_file'):
                out.append((f'{split}_evaluator.ann_file', ev.ann_file))
    return out


@pytest.mark.parametrize('config', FAMILIES)
@pytest.mark.slow
def test_every_dataset_path_exists_under_the_tiny_root(config, tiny_root):
    cfg = load_config(config)
    lines = retarget_data_root(cfg, tiny_root)
    assert lines and all(' -> ' + tiny_root in line for line in lines)
    paths = _dataset_paths(cfg)
    assert paths
    missing = [(what, p) for what, p in paths if not osp.exists(p)]
    assert not missing, missing


def test_nested_datasets_evaluators_and_other_paths(tmp_path):
    cfg = Config(
        dict(
            train_dataloader=dict(
                dataset=dict(
                    type='ConcatDataset',
                    datasets=[
                        dict(
                            type='RepeatDataset',
                            times=2,
                            dataset=dict(
                                type='mmlocat.CheckedDataset',
                                dataset=dict(data_root='data/coco/'))),
                        dict(data_root='./data/lvis_v1', ann_file='a.json'),
                    ])),
            val_evaluator=[
                dict(ann_file='data/coco/annotations/val.json'),
                dict(ann_file='/elsewhere/x.json')
            ],
            model=dict(embeddings=('data/coco/e.npy', 'database/x'))))
    root = str(tmp_path)
    lines = retarget_data_root(cfg, root)
    ds = cfg.train_dataloader.dataset.datasets
    assert ds[0].dataset.dataset.data_root == root + '/coco/'
    assert ds[1].data_root == root + '/lvis_v1'
    assert ds[1].ann_file == 'a.json'  # relative to its data_root
    assert cfg.val_evaluator[0].ann_file == root + '/coco/annotations/val.json'
    assert cfg.val_evaluator[1].ann_file == '/elsewhere/x.json'
    assert cfg.model.embeddings == (root + '/coco/e.npy', 'database/x')
    assert lines[0] == (
        'train_dataloader.dataset.datasets.0.dataset.dataset.data_root: '
        f'data/coco/ -> {root}/coco/')
    assert len(lines) == 4
    with pytest.raises(FileNotFoundError, match='no such folder'):
        retarget_data_root(cfg, str(tmp_path / 'absent'))
    with pytest.raises(ValueError, match='names no path under data/'):
        retarget_data_root(Config(dict(a='b')), root)


@pytest.mark.e2e
def test_train_one_iteration_from_the_tiny_data(tiny_root, tmp_path):
    """A segmentation recipe trains one CPU iteration from the tiny data
    with ``--data-root``, a schedule override and (no downloaded weights
    here) a random backbone; the flag prints what it moved."""
    proc = run_tool(
        'tools/train.py',
        'configs/locat/upernet_locat-t_ade20k.py',
        '--data-root',
        tiny_root,
        '--work-dir',
        str(tmp_path / 'work'),
        '--cfg-options',
        'train_cfg.max_iters=1',
        'train_dataloader.batch_size=2',
        # no ImageNet weights in a test: the backbone starts at random
        'model.backbone.init_cfg=None')
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (f'--data-root: train_dataloader.dataset.data_root: '
            f'data/ade/ADEChallengeData2016 -> {tiny_root}/ade/'
            'ADEChallengeData2016') in proc.stdout
    assert osp.isfile(tmp_path / 'work' / 'iter_1.pth')
