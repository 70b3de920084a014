"""PointInBox(protocol='public') equals the public ``evaluate_patch_hit.py``.

``script_cells`` transcribes the public script's rule as
docs/method.md#point-in-box-pib and issue 17 state it (Resize(256) by one
factor ``256 / min(w, h)`` with truncated sides, floored centre-crop offset,
box clipped to [0, 224], every cell from ``floor(min / 16)`` to ``floor(max /
16)``, raw annotation integers): an independent statement in the script's own
shape (a set of flat patch indices), not the implementation's.
"""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers.tiny_archs import tiny_vit

from mmlocat.evaluation import PointInBox
from mmlocat.evaluation.metrics.pib import point_in_box, public_hit_window


def script_cells(bbox, width, height, image_size=224, patch_size=16):
    xmin, ymin, xmax, ymax = bbox
    scale = 256.0 / min(width, height)
    rw = int(width * scale)
    rh = int(height * scale)
    crop_l = (rw - 224) // 2
    crop_t = (rh - 224) // 2
    xf_min = max(0, min(224, xmin * scale - crop_l))
    yf_min = max(0, min(224, ymin * scale - crop_t))
    xf_max = max(0, min(224, xmax * scale - crop_l))
    yf_max = max(0, min(224, ymax * scale - crop_t))
    n = image_size // patch_size
    cells = set()
    for py in range(
            int(yf_min // patch_size), min(int(yf_max // patch_size) + 1, n)):
        for px in range(
                int(xf_min // patch_size),
                min(int(xf_max // patch_size) + 1, n)):
            cells.add(py * n + px)
    return cells


def script_keeps(bbox, width, height):
    """The script's filter on the raw XML integers."""
    xmin, ymin, xmax, ymax = bbox
    return (xmax - xmin) * (ymax - ymin) < width * height * 0.25


def random_cases(num, seed):
    """Image sizes as ImageNet's and raw 1-based integer boxes, a share of
    them on cell borders or (partly) outside the centre crop."""
    rng = np.random.default_rng(seed)
    cases = []
    for i in range(num):
        width, height = (int(v) for v in rng.integers(60, 1200, size=2))
        if i % 7 == 0:  # a side exactly 256 / a multiple of 16 after resize
            width = 256 if i % 2 else width
            height = 16 * int(rng.integers(16, 60))
        x = np.sort(rng.integers(1, width + 1, size=2))
        y = np.sort(rng.integers(1, height + 1, size=2))
        if i % 5 == 0:  # a thin box near an edge (cropped off)
            x = np.array([1, int(rng.integers(1, max(2, width // 8)))])
        if i % 11 == 0:
            y = np.array(
                [int(height - rng.integers(1, max(2, height // 8))), height])
        cases.append(
            ((int(x[0]), int(y[0]), int(x[1]), int(y[1])), width, height))
    return cases


def ours_cells(box, width, height):
    rows, cols = public_hit_window(box, (width, height))
    return {r * 14 + c for r in rows for c in cols}


def test_cell_sets_equal_the_script_on_thousands_of_boxes():
    cases = random_cases(5000, seed=0)
    mismatches = [(c, script_cells(*c), ours_cells(*c)) for c in cases
                  if script_cells(*c) != ours_cells(*c)]
    assert not mismatches, mismatches[:3]
    # The random cases reach every special rule of the script.
    empty = sum(not script_cells(*c) for c in cases)
    at_left = sum(
        bool(script_cells(*c)) and c[0][2] * 256 /
        min(c[1:]) < (int(c[1] * 256 / min(c[1:])) - 224) // 2 for c in cases)
    assert empty > 50 and at_left > 50, (empty, at_left)


def test_the_public_rule_differs_from_the_exact_one():
    """Sanity of the comparison: on the same boxes the exact protocol
    (1-based shift, per-axis factors, rounded offset, positive overlap)
    gives other cell sets for a large share, as the issue measured."""
    from mmcv.transforms import CenterCrop

    from mmlocat.datasets import ResizeEdgeWithBoxes
    differ = 0
    cases = random_cases(300, seed=1)
    for box, width, height in cases:
        results = dict(
            img=np.zeros((height, width, 3), np.uint8),
            gt_bboxes=np.array([[box[0] - 1, box[1] - 1, box[2], box[3]]],
                               np.float32))
        results = ResizeEdgeWithBoxes(scale=256)(results)
        mapped = CenterCrop(crop_size=224)(results)['gt_bboxes']
        exact = set()
        for cell in range(196):
            score = np.zeros((14, 14))
            score.flat[cell] = 1
            if point_in_box(score, mapped):
                exact.add(cell)
        differ += exact != script_cells(box, width, height)
    assert 0.05 < differ / len(cases) < 0.5, differ


def test_metric_equals_the_script_end_to_end():
    """PointInBox('public') over data samples (random score maps, raw boxes,
    ``ori_shape``) gives the script's hit count."""
    cases = random_cases(2000, seed=2)
    gen = torch.Generator().manual_seed(3)
    metric = PointInBox(protocol='public')
    hits = 0
    samples = []
    for box, width, height in cases:
        score = torch.rand(14, 14, generator=gen)
        hits += int(score.flatten().argmax()) in script_cells(
            box, width, height)
        samples.append(
            dict(
                patch_score=score,
                ori_gt_bboxes=np.array([box], np.float32),
                ori_shape=(height, width),
                img_shape=(224, 224)))
    metric.process(None, samples)
    result = metric.evaluate(len(samples))
    assert result['pib/num_images'] == len(cases)
    assert result['pib/PiB'] == hits / len(cases)
    assert 0 < hits < len(cases)


def test_filter_on_raw_integers(tmp_path):
    """The dataset with ``one_based=False`` keeps exactly the images the
    script keeps (area of the raw integers < 25% of the XML size)."""
    from mmlocat.datasets import ImageNetLocDataset
    from mmlocat.testing.common import save_jpg
    rng = np.random.default_rng(4)
    (tmp_path / 'val' / 'a').mkdir(parents=True)
    (tmp_path / 'boxes').mkdir()
    expected, lines = [], []
    for i in range(60):
        width, height = 40, 30
        # areas around the 25% bound (300 px), where +1 on each side flips
        # the exact filter but not the script's
        bw, bh = (int(v) for v in rng.integers(12, 22, size=2))
        x0, y0 = 1 + int(rng.integers(0, 40 - bw)), 1 + int(
            rng.integers(0, 30 - bh))
        box = (x0, y0, x0 + bw, y0 + bh)
        name = f'img_{i}'
        save_jpg(
            str(tmp_path / 'val' / 'a' / f'{name}.JPEG'),
            np.zeros((height, width, 3), np.uint8))
        (tmp_path / 'boxes' / f'{name}.xml').write_text(
            f'<annotation><size><width>{width}</width><height>{height}'
            '</height><depth>3</depth></size><object><name>a</name>'
            f'<bndbox><xmin>{box[0]}</xmin><ymin>{box[1]}</ymin>'
            f'<xmax>{box[2]}</xmax><ymax>{box[3]}</ymax></bndbox></object>'
            '</annotation>')
        lines.append(f'a/{name}.JPEG 0\n')
        if script_keeps(box, width, height):
            expected.append(name)
    (tmp_path / 'val.txt').write_text(''.join(lines))
    dataset = ImageNetLocDataset(
        data_root=str(tmp_path),
        data_prefix='val',
        ann_file='val.txt',
        box_prefix='boxes',
        one_based=False,
        filter_single_small=True,
        max_area_ratio=0.25)
    kept = [info['img_path'].split('/')[-1][:-5] for info in dataset]
    assert kept == expected
    assert 0 < len(kept) < 60


def test_public_metric_checks_its_inputs():
    metric = PointInBox(protocol='public')
    assert metric.box_key == 'ori_gt_bboxes'
    good = dict(
        patch_score=np.zeros((14, 14)),
        ori_gt_bboxes=np.array([[1., 1., 50., 50.]]),
        ori_shape=(300, 400))
    with pytest.raises(ValueError, match='14x14'):
        metric.process(None, [dict(good, patch_score=np.zeros((7, 7)))])
    with pytest.raises(KeyError, match='ori_shape'):
        metric.process(None, [{
            k: v
            for k, v in good.items() if k != 'ori_shape'
        }])
    with pytest.raises(ValueError, match='empty'):
        metric.process(None, [dict(good, ori_gt_bboxes=np.zeros((0, 4)))])
    with pytest.raises(ValueError, match='protocol'):
        PointInBox(protocol='paper')
    with pytest.raises(ValueError, match='crop_size'):
        PointInBox(protocol='public', resize=128, crop_size=224)
    metric.process(None, [good])
    assert metric.results == [dict(hit=True)]


TINY = tiny_vit(num_layers=1)


def test_lastvit_scores_against_the_cls_output_when_asked():
    from mmlocat.models import LaStViT
    torch.manual_seed(0)
    model = LaStViT(
        arch=TINY, img_size=64, patch_size=16, score_query='cls').eval()
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        out = model.forward_with_scores(x)
        (tokens, ), _ = model.forward_intermediates(x, [0])
    ref = F.cosine_similarity(tokens[:, 1:], tokens[:, :1], dim=-1)
    torch.testing.assert_close(out['patch_score'].flatten(1), ref)
    # The global token is still LazyStrike's (the classification output).
    torch.testing.assert_close(out['global_token'], model(x)[0])
    with pytest.raises(ValueError, match='score_query'):
        LaStViT(arch=TINY, score_query='patch')


@pytest.mark.parametrize(
    'name', ['pib_last-b_in1k_public.py', 'pib_vit-b_in1k_public.py'])
def test_public_config_end_to_end(name, tmp_path, repo_root):
    """The public configs on generated ImageNet-format data (LOC XML): the
    dataset, pipeline, model and metric give the script's hit ratio for the
    model's own argmax cells."""
    import os.path as osp
    import xml.etree.ElementTree as ET

    from mmengine.config import Config
    from mmengine.dataset import pseudo_collate
    from mmengine.registry import init_default_scope
    from mmpretrain.registry import DATASETS, METRICS, MODELS

    from mmlocat.testing.imagenet_writer import write_imagenet
    write_imagenet(
        str(tmp_path), 1, 6, img_size=(150, 200), seed=0, num_classes=2)
    cfg = Config.fromfile(osp.join(repo_root, 'configs', 'last', name))
    init_default_scope('mmpretrain')
    cfg.model.backbone.arch = TINY
    cfg.model.head.in_channels = 32
    torch.manual_seed(0)
    model = MODELS.build(cfg.model).eval()
    dataset_cfg = cfg.test_dataloader.dataset
    dataset_cfg.data_root = str(tmp_path)
    dataset = DATASETS.build(dataset_cfg)
    metric = METRICS.build(cfg.test_evaluator[0])
    hits = 0
    for i in range(len(dataset)):
        data = pseudo_collate([dataset[i]])
        with torch.no_grad():
            (pred, ) = model.test_step(data)
        metric.process(data, [pred.to_dict()])
        stem = osp.splitext(osp.basename(pred.img_path))[0]
        root = ET.parse(osp.join(tmp_path, 'val_boxes', stem + '.xml'))
        box = [
            int(root.find('object/bndbox/' + k).text)
            for k in ('xmin', 'ymin', 'xmax', 'ymax')
        ]
        size = [int(root.find('size/' + k).text) for k in ('width', 'height')]
        assert script_keeps(box, *size)
        hits += int(pred.patch_score.flatten().argmax()) in script_cells(
            box, *size)
    assert len(dataset) >= 2
    result = metric.evaluate(len(dataset))
    assert result['pib/PiB'] == hits / len(dataset)
