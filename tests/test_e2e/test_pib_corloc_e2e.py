"""End to end: tools/test.py with the PiB and CorLoc configs on tiny data.

A tiny ImageNet folder with LOC XML boxes and a COCO-format box file are
written to tmp_path; the shipped configs are derived with a 32-d, 1-layer,
2-head LaSt-ViT and a randomly initialised checkpoint, and evaluated
as a user runs them (in-process: helpers.harness.run_tool).
"""
import json
import os.path as osp
import re

import cv2
import numpy as np
import pytest
from helpers.harness import run_tool

pytestmark = pytest.mark.e2e

TINY_ARCH = ('dict(_delete_=True, embed_dims=32, num_layers=1, num_heads=2, '
             'feedforward_channels=64)')

PIB_CONFIG = """
_base_ = [{base!r}]
model = dict(
    backbone=dict(arch={arch}),
    head=dict(num_classes=2, in_channels=32))
data_preprocessor = dict(num_classes=2)
test_dataloader = dict(
    batch_size=2, num_workers=0, dataset=dict(data_root={root!r}))
test_evaluator = [
    dict(type='mmlocat.PointInBox', patch_size=16),
    dict(type='mmlocat.CorLoc', patch_size=16),
]
"""

CORLOC_COCO_CONFIG = """
_base_ = [{base!r}]
model = dict(backbone=dict(arch={arch}, norm_cfg=dict(type='LN')))
test_dataloader = dict(
    num_workers=0,
    dataset=dict(
        _delete_=True,
        type='mmlocat.CocoBoxesDataset',
        data_root={root!r},
        ann_file='annotations/boxes.json',
        data_prefix=dict(img_path='images'),
        pipeline=[
            dict(type='LoadImageFromFile'),
            dict(type='PackInputs', algorithm_keys=('gt_bboxes', )),
        ]))
"""

# (name, wnid, boxes as 1-based inclusive VOC values); 96x72 images.
IMAGES = [
    ('a', 'n01', [(11, 11, 40, 30)]),
    ('b', 'n01', [(51, 21, 80, 50)]),
    ('c', 'n02', [(5, 5, 30, 60), (60, 5, 90, 30)]),  # two boxes: dropped
    ('d', 'n02', [(31, 31, 60, 60)]),
]


def _image(seed):
    rng = np.random.RandomState(seed)
    return rng.randint(0, 255, (72, 96, 3)).astype(np.uint8)


def _write_imagenet(root):
    lines = []
    for i, (name, wnid, boxes) in enumerate(IMAGES):
        path = root / 'val' / wnid / f'{name}.JPEG'
        path.parent.mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(path), _image(i))
        lines.append(f'{wnid}/{name}.JPEG {int(wnid[-1]) - 1}')
        objects = ''.join(
            f'<object><name>{wnid}</name><bndbox><xmin>{b[0]}</xmin>'
            f'<ymin>{b[1]}</ymin><xmax>{b[2]}</xmax><ymax>{b[3]}</ymax>'
            '</bndbox></object>' for b in boxes)
        (root / 'val_boxes').mkdir(exist_ok=True)
        (root / 'val_boxes' / f'{name}.xml').write_text(
            f'<annotation><filename>{name}</filename><size><width>96</width>'
            f'<height>72</height><depth>3</depth></size>{objects}'
            '</annotation>')
    (root / 'meta').mkdir()
    (root / 'meta' / 'val.txt').write_text('\n'.join(lines) + '\n')


def _write_coco(root):
    (root / 'images').mkdir(parents=True)
    (root / 'annotations').mkdir()
    images, anns = [], []
    for i, (name, _, boxes) in enumerate(IMAGES):
        cv2.imwrite(str(root / 'images' / f'{name}.jpg'), _image(i))
        images.append(
            dict(id=i + 1, file_name=f'{name}.jpg', width=96, height=72))
        for b in boxes:
            anns.append(
                dict(
                    id=len(anns) + 1,
                    image_id=i + 1,
                    category_id=1,
                    bbox=[
                        b[0] - 1, b[1] - 1, b[2] - b[0] + 1, b[3] - b[1] + 1
                    ],
                    area=float((b[2] - b[0] + 1) * (b[3] - b[1] + 1)),
                    iscrowd=0))
    (root / 'annotations' / 'boxes.json').write_text(
        json.dumps(
            dict(
                images=images,
                annotations=anns,
                categories=[dict(id=1, name='object')])))


def _random_checkpoint(config, path):
    """The config's model as built (tools/misc/init_checkpoint.py)."""
    run_tool('tools/misc/init_checkpoint.py', config, path).ok()


def _tested_metrics(config, ckpt, work_dir):
    log = run_tool('tools/test.py', config, ckpt, '--work-dir',
                   work_dir).ok(4000)
    return {
        k: float(v)
        for k, v in re.findall(r'((?:pib|corloc)/\w+): ([0-9.]+)', log)
    }


@pytest.mark.timeout(300)
def test_pib_and_corloc_imagenet_loc(tmp_path, repo_root):
    data = tmp_path / 'imagenet'
    _write_imagenet(data)
    config = tmp_path / 'pib_tiny.py'
    config.write_text(
        PIB_CONFIG.format(
            base=osp.join(repo_root, 'configs', 'last', 'pib_last-b_in1k.py'),
            arch=TINY_ARCH,
            root=str(data)))
    ckpt = tmp_path / 'random.pth'
    _random_checkpoint(config, ckpt)
    metrics = _tested_metrics(config, ckpt, tmp_path / 'work')
    # two batches: CorLoc also reports the evaluator's images/s
    assert set(metrics) == {
        'pib/PiB', 'pib/num_images', 'corloc/CorLoc', 'corloc/num_images',
        'corloc/images_per_s', 'corloc/num_without_gt',
        'corloc/num_no_foreground'
    }
    assert metrics['corloc/images_per_s'] > 0
    assert metrics['pib/num_images'] == 3  # 'c' has two boxes: filtered
    assert metrics['corloc/num_images'] == 3
    assert 0 <= metrics['pib/PiB'] <= 1
    assert 0 <= metrics['corloc/CorLoc'] <= 1


@pytest.mark.timeout(300)
def test_corloc_coco_boxes(tmp_path, repo_root):
    data = tmp_path / 'coco'
    _write_coco(data)
    config = tmp_path / 'corloc_tiny.py'
    config.write_text(
        CORLOC_COCO_CONFIG.format(
            base=osp.join(repo_root, 'configs', 'last',
                          'corloc_dino-s_voc07.py'),
            arch=TINY_ARCH,
            root=str(data)))
    ckpt = tmp_path / 'random.pth'
    _random_checkpoint(config, ckpt)
    metrics = _tested_metrics(config, ckpt, tmp_path / 'work')
    assert set(metrics) == {
        'corloc/CorLoc', 'corloc/num_images', 'corloc/images_per_s',
        'corloc/num_without_gt', 'corloc/num_no_foreground'
    }
    assert metrics['corloc/images_per_s'] > 0
    assert metrics['corloc/num_images'] == 4  # every image, full resolution
    assert 0 <= metrics['corloc/CorLoc'] <= 1
