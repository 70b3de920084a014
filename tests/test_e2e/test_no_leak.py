"""No memory growth on long runs (item 7 of issue 15).

The demo's UperNet + LocAtViT config (``configs/demo/``), shrunk by
:mod:`helpers.shrink` (32-d 4-block backbone) and run on 32 px crops of its
own augmentation pipeline, trains 500 iterations on CPU with 2 persistent
dataloader workers. The main
process's resident memory after iteration 100 and after iteration 500 must
differ by less than 5 %. Runs in CI (about a minute on 2 cores).
"""
import os.path as osp

import pytest
from helpers.shrink import write_tiny_config
from tiny_cls import probe_env, run_train

from mmlocat.testing import generate

pytestmark = pytest.mark.e2e

ITERS, EARLY = 500, 100
CROP = (32, 32)
# the demo's training pipeline at a quarter of its scale
PIPELINE = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(
        type='RandomResize',
        scale=(40, 40),
        ratio_range=(0.75, 1.5),
        keep_ratio=True),
    dict(type='RandomCrop', crop_size=CROP, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]


@pytest.mark.timeout(600)
@pytest.mark.slow
def test_rss_flat_over_500_iterations(tmp_path, repo_root, subprocess_env):
    root = generate(
        'ade20k',
        str(tmp_path / 'data'),
        num_train=8,
        num_val=1,
        img_size=(64, 96),
        seed=0)['data_root']
    config = write_tiny_config(
        osp.join(repo_root, 'configs/demo/upernet_locat-t_tiny-ade20k.py'),
        str(tmp_path / 'leak.py'),
        root,
        iters=ITERS,
        extra=dict(
            model=dict(data_preprocessor=dict(size=CROP)),
            custom_imports=dict(
                imports=['mmlocat', 'train_probe'],
                allow_failed_imports=False),
            custom_hooks=[dict(type='TrainProbeHook')],
            train_dataloader=dict(
                num_workers=2,
                persistent_workers=True,
                dataset=dict(pipeline=PIPELINE)),
            val_dataloader=None,
            val_evaluator=None,
            val_cfg=None,
            default_hooks=dict(logger=dict(interval=100))))
    rss_file = str(tmp_path / 'rss.txt')
    log = run_train(
        config, str(tmp_path / 'work'),
        probe_env(subprocess_env, rss=rss_file, rss_at=f'{EARLY},{ITERS}'),
        repo_root)
    assert f'Iter(train) [{ITERS}/{ITERS}]' in log
    with open(rss_file) as f:
        rss = dict(map(int, line.split()) for line in f)
    early, late = rss[EARLY], rss[ITERS]
    growth = (late - early) / early
    print(f'main-process RSS: iter {EARLY} {early} kB, iter {ITERS} '
          f'{late} kB ({growth:+.2%})')
    assert abs(growth) < 0.05, rss
