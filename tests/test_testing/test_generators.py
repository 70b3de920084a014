"""Generated datasets load with the real host dataset classes."""
import hashlib
import json
import os
import os.path as osp
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from PIL import Image

from mmlocat.testing import DATASET_KINDS, generate, tight_box
from mmlocat.testing.coco_categories import COCO_CATEGORIES
from mmlocat.testing.imagenet_writer import _scene as imagenet_scene

SIZE = (64, 64)


@pytest.fixture(scope='module')
def data(tmp_path_factory):
    """Each kind generated once: 4 train / 2 val images of 64x64."""
    root = tmp_path_factory.mktemp('tiny')
    cache = {}

    def get(kind, **options):
        key = (kind, tuple(sorted(options.items())))
        if key not in cache:
            name = kind + ''.join(f'_{k}-{v}' for k, v in key[1])
            cache[key] = generate(
                kind, str(root / name), 4, 2, SIZE, seed=0, **options)
        return cache[key]

    return get


def _load_seg(dataset):
    maps = []
    for i in range(len(dataset)):
        item = dataset[i]
        assert item['img'].shape == SIZE + (3, )
        assert item['gt_seg_map'].shape == SIZE
        maps.append(item['gt_seg_map'])
    return maps


def _seg_pipeline():
    from mmcv.transforms import LoadImageFromFile
    from mmseg.datasets.transforms import LoadAnnotations
    return [LoadImageFromFile(), LoadAnnotations()]


def _check_labels(maps, paths, raw_files, reduce_zero):
    values = set(np.unique(np.stack(maps)).tolist())
    assert values <= set(paths['active_classes']) | {255}
    assert 255 in values and len(values - {255}) >= 3
    # The loaded map is the stored PNG after the format's convention.
    for seg, raw_file in zip(maps, raw_files):
        raw = np.array(Image.open(raw_file)).astype(int)
        want = np.where(raw == 0, 255, raw - 1) if reduce_zero else raw
        np.testing.assert_array_equal(seg, want)


def test_ade20k(data):
    from mmseg.datasets import ADE20KDataset
    paths = data('ade20k')
    for split, num in (('train', 4), ('val', 2)):
        ds = ADE20KDataset(
            data_root=paths['data_root'],
            data_prefix=dict(
                img_path=paths[f'{split}_img_dir'],
                seg_map_path=paths[f'{split}_ann_dir']),
            pipeline=_seg_pipeline())
        assert len(ds) == num and len(ds.metainfo['classes']) == 150
        raw = [ds.get_data_info(i)['seg_map_path'] for i in range(num)]
        assert all(r.endswith('.png') for r in raw)
        if split == 'train':
            _check_labels(_load_seg(ds), paths, raw, reduce_zero=True)


def test_coco_stuff(data):
    from mmseg.datasets import COCOStuffDataset
    paths = data('coco_stuff')
    ds = COCOStuffDataset(
        data_root=paths['data_root'],
        data_prefix=dict(
            img_path=paths['train_img_dir'],
            seg_map_path=paths['train_ann_dir']),
        pipeline=_seg_pipeline())
    assert len(ds) == 4 and len(ds.metainfo['classes']) == 171
    raw = [ds.get_data_info(i)['seg_map_path'] for i in range(4)]
    assert all(r.endswith('_labelTrainIds.png') for r in raw)
    _check_labels(_load_seg(ds), paths, raw, reduce_zero=False)
    # Things (0..79) are objects, stuff (80..170) the backgrounds.
    assert any(c < 80 for c in paths['active_classes'])
    assert any(c >= 80 for c in paths['active_classes'])


def test_pascal_context59(data):
    from mmseg.datasets import PascalContextDataset59
    paths = data('pascal_context')
    for split, num in (('train', 4), ('val', 2)):
        ds = PascalContextDataset59(
            data_root=paths['data_root'],
            data_prefix=dict(
                img_path=paths['img_dir'], seg_map_path=paths['ann_dir']),
            ann_file=paths[f'{split}_split'],
            pipeline=_seg_pipeline())
        assert len(ds) == num and len(ds.metainfo['classes']) == 59
        if split == 'train':
            raw = [ds.get_data_info(i)['seg_map_path'] for i in range(num)]
            _check_labels(_load_seg(ds), paths, raw, reduce_zero=True)


def _det_items(dataset):
    items = [dataset[i] for i in range(len(dataset))]
    for item in items:
        assert item['img'].shape == SIZE + (3, )
        masks = item['gt_masks'].masks
        boxes = item['gt_bboxes'].numpy()
        assert len(masks) == len(boxes) > 0
        assert not item['gt_ignore_flags'].any()
        for mask, box in zip(masks, boxes):
            # box = tight box of the instance mask
            np.testing.assert_array_equal(box, tight_box(mask.astype(bool)))
    return items


def _det_pipeline():
    from mmcv.transforms import LoadImageFromFile
    from mmdet.datasets.transforms import LoadAnnotations
    return [
        LoadImageFromFile(),
        LoadAnnotations(with_bbox=True, with_mask=True)
    ]


@pytest.mark.parametrize('segm_format', ['rle', 'polygon'])
def test_coco_instances(data, segm_format):
    from mmdet.datasets import CocoDataset
    paths = data('coco', segm_format=segm_format)
    root = paths['data_root']
    with open(osp.join(root, paths['train_ann_file'])) as f:
        coco = json.load(f)
    assert [(c['id'], c['name']) for c in coco['categories']
            ] == [(cid, name) for cid, name, _ in COCO_CATEGORIES]
    assert [c['name'] for c in coco['categories']
            ] == list(CocoDataset.METAINFO['classes'])
    assert all(a['iscrowd'] == 0 for a in coco['annotations'])
    kind = list if segm_format == 'polygon' else dict
    assert any(
        isinstance(a['segmentation'], kind) for a in coco['annotations'])
    for split, num in (('train', 4), ('val', 2)):
        ds = CocoDataset(
            data_root=root,
            ann_file=paths[f'{split}_ann_file'],
            data_prefix=dict(img=paths[f'{split}_img_dir']),
            pipeline=_det_pipeline())
        assert len(ds) == num
        items = _det_items(ds)
        for item in items:
            assert osp.isfile(item['img_path'])
            assert f'{split}2017' in item['img_path']
        labels = np.concatenate([it['gt_bboxes_labels'] for it in items])
        assert labels.min() >= 0 and labels.max() < 80


def _perfect_samples(ann_file, cat_ids):
    """Predictions equal to the ground truth of a COCO-format file."""
    import torch
    from pycocotools import mask as mask_utils
    from pycocotools.coco import COCO
    coco = COCO(ann_file)
    samples = []
    for img_id in coco.getImgIds():
        info = coco.loadImgs([img_id])[0]
        anns = coco.loadAnns(coco.getAnnIds(imgIds=[img_id]))
        anns = [a for a in anns if a['category_id'] in cat_ids]
        boxes = [[x, y, x + w, y + h]
                 for x, y, w, h in (a['bbox'] for a in anns)]
        masks = [
            mask_utils.decode(coco.annToRLE(a)).astype(bool) for a in anns
        ]
        samples.append(
            dict(
                img_id=img_id,
                ori_shape=(info['height'], info['width']),
                pred_instances=dict(
                    bboxes=torch.tensor(boxes,
                                        dtype=torch.float32).reshape(-1, 4),
                    scores=torch.ones(len(anns)),
                    labels=torch.tensor(
                        [cat_ids.index(a['category_id']) for a in anns],
                        dtype=torch.long),
                    masks=torch.from_numpy(
                        np.stack(masks) if masks else np.zeros(
                            (0, ) + SIZE, dtype=bool)))))
    return samples


def _evaluate(metric, samples):
    metric.process({}, samples)
    return metric.evaluate(len(samples))


def test_coco_metric_perfect_prediction(data):
    from mmdet.datasets import CocoDataset
    from mmdet.evaluation import CocoMetric
    paths = data('coco')
    ann_file = osp.join(paths['data_root'], paths['val_ann_file'])
    cat_ids = [cid for cid, _, _ in COCO_CATEGORIES]

    def run(samples):
        metric = CocoMetric(ann_file=ann_file, metric=['bbox', 'segm'])
        metric.dataset_meta = dict(classes=CocoDataset.METAINFO['classes'])
        return _evaluate(metric, samples)

    res = run(_perfect_samples(ann_file, cat_ids))
    assert res['coco/bbox_mAP'] == 1.0
    assert res['coco/segm_mAP'] == 1.0
    # Negative control: boxes shifted by 3 px are no longer perfect.
    shifted = _perfect_samples(ann_file, cat_ids)
    for s in shifted:
        s['pred_instances']['bboxes'] += 3
    assert run(shifted)['coco/bbox_mAP'] < 1.0


def _lvis_json(paths, split):
    with open(osp.join(paths['data_root'], paths[f'{split}_ann_file'])) as f:
        return json.load(f)


def test_lvis_format(data):
    paths = data('lvis')
    train, val = _lvis_json(paths, 'train'), _lvis_json(paths, 'val')
    assert train['categories'] == val['categories']
    cats = train['categories']
    assert {c['frequency'] for c in cats} == {'r', 'c', 'f'}
    for cat in cats:
        mine = [
            a for a in train['annotations'] if a['category_id'] == cat['id']
        ]
        assert cat['instance_count'] == len(mine)
        assert cat['image_count'] == len({a['image_id'] for a in mine})
    for split, doc in (('train', train), ('val', val)):
        assert len(doc['images']) == (4 if split == 'train' else 2)
        for img in doc['images']:
            rel = img['coco_url'].replace('http://images.cocodataset.org/', '')
            assert rel.startswith(f'{split}2017/')
            assert osp.isfile(osp.join(paths['data_root'], rel))
            present = {
                a['category_id']
                for a in doc['annotations'] if a['image_id'] == img['id']
            }
            assert not present & set(img['neg_category_ids'])
            assert set(img['not_exhaustive_category_ids']) <= present
        for ann in doc['annotations']:
            assert set(ann) >= {
                'id', 'image_id', 'category_id', 'segmentation', 'area', 'bbox'
            }


def test_lvis_names_are_real(data):
    from mmdet.datasets import LVISV1Dataset
    names = LVISV1Dataset.METAINFO['classes']
    for cat in _lvis_json(data('lvis'), 'train')['categories']:
        assert names[cat['id'] - 1] == cat['name']


def test_lvis_dataset_and_metric(data, monkeypatch):
    pytest.importorskip('lvis', reason='mmdet LVIS needs the lvis package')
    # lvis 0.5.3 (the PyPI release) still uses ``np.float``, removed in
    # numpy 1.24; restore the alias so its evaluation code can run.
    monkeypatch.setattr(np, 'float', float, raising=False)
    from mmdet.datasets import LVISV1Dataset
    from mmdet.evaluation import LVISMetric
    paths = data('lvis')
    ds = LVISV1Dataset(
        data_root=paths['data_root'],
        ann_file=paths['train_ann_file'],
        data_prefix=dict(img=''),
        pipeline=_det_pipeline())
    assert len(ds) == 4
    _det_items(ds)
    ann_file = osp.join(paths['data_root'], paths['val_ann_file'])
    cat_ids = [c['id'] for c in _lvis_json(paths, 'val')['categories']]
    metric = LVISMetric(ann_file=ann_file, metric=['bbox', 'segm'])
    metric.dataset_meta = ds.metainfo
    res = _evaluate(metric, _perfect_samples(ann_file, cat_ids))
    assert res['lvis/bbox_AP'] == 1.0 and res['lvis/segm_AP'] == 1.0


def test_imagenet(data):
    from mmpretrain.datasets import CustomDataset, ImageNet
    paths = data('imagenet')
    wnids = paths['classes']
    assert len(wnids) == 10 and wnids == sorted(wnids)
    for split, per_class in (('train', 4), ('val', 2)):
        ds = ImageNet(
            data_root=paths['data_root'],
            split=split,
            metainfo=dict(classes=wnids))
        assert len(ds) == 10 * per_class
        for i in range(len(ds)):
            info = ds.get_data_info(i)
            assert osp.isfile(info['img_path'])
            wnid = osp.basename(osp.dirname(info['img_path']))
            assert wnids[info['gt_label']] == wnid
        # Folder scanning gives the same classes and samples.
        scanned = CustomDataset(
            data_root=paths['data_root'], data_prefix=paths[f'{split}_prefix'])
        assert list(scanned.metainfo['classes']) == wnids
        assert sorted(
            (d['img_path'], d['gt_label'])
            for d in scanned.load_data_list()) == sorted(
                (d['img_path'], d['gt_label']) for d in ds.load_data_list())


def test_imagenet_loc_boxes(data):
    paths = data('imagenet')
    root, wnids = paths['data_root'], paths['classes']
    lines = open(osp.join(root, paths['val_ann_file'])).read().split('\n')
    single_small = multi = 0
    for index, line in enumerate(filter(None, lines)):
        rel, label = line.rsplit(' ', 1)
        stem = osp.splitext(osp.basename(rel))[0]
        xml = ET.parse(osp.join(root, 'val_boxes', stem + '.xml')).getroot()
        assert xml.findtext('filename') == stem
        assert xml.findtext('size/width') == str(SIZE[1])
        assert xml.findtext('size/height') == str(SIZE[0])
        objs = xml.findall('object')
        assert {o.findtext('name') for o in objs} == {wnids[int(label)]}
        boxes = np.array([[
            float(o.findtext(f'bndbox/{k}'))
            for k in ('xmin', 'ymin', 'xmax', 'ymax')
        ] for o in objs])
        # 1-based inclusive (VOC) -> 0-based pixel edges.
        boxes[:, :2] -= 1
        scene = imagenet_scene(0, 'val', index, SIZE, int(label))
        np.testing.assert_array_equal(boxes, scene.boxes)
        for mask, box in zip(scene.masks, boxes):
            np.testing.assert_array_equal(box, tight_box(mask))
        area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
        if len(objs) == 1 and area[0] < 0.25 * SIZE[0] * SIZE[1]:
            single_small += 1
        multi += len(objs) > 1
    assert single_small >= 3 and multi >= 3


def test_imagenet_loc_reader_agrees(data):
    """The library's LOC reader gives the same boxes."""
    from mmlocat.datasets import parse_loc_xml
    paths = data('imagenet')
    xml = osp.join(paths['data_root'], 'val_boxes',
                   'ILSVRC2012_val_00000001.xml')
    boxes, hw = parse_loc_xml(xml)
    scene = imagenet_scene(0, 'val', 0, SIZE, 0)
    np.testing.assert_array_equal(boxes, scene.boxes)
    assert tuple(hw) == SIZE


def _digest(root):
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            if name.startswith('.mmlocat_tiny_'):
                continue  # the stamp records the root itself
            path = osp.join(dirpath, name)
            with open(path, 'rb') as f:
                out[osp.relpath(path,
                                root)] = hashlib.md5(f.read()).hexdigest()
    return out


@pytest.mark.parametrize('kind', DATASET_KINDS)
def test_deterministic(tmp_path, kind):
    digests = {}
    for name, seed in (('a', 3), ('b', 3), ('c', 4)):
        root = str(tmp_path / name)
        generate(kind, root, 2, 1, (32, 48), seed=seed)
        digests[name] = _digest(root)
    a, b, c = digests['a'], digests['b'], digests['c']
    assert len(a) >= 5 and a == b
    assert a.keys() == c.keys() and a != c


def test_idempotent_and_regenerates(tmp_path):
    root = str(tmp_path / 'ctx')
    paths = generate('pascal_context', root, 3, 1, SIZE, seed=0)
    img_dir = osp.join(paths['data_root'], 'JPEGImages')
    first = osp.join(img_dir, '2008_000001.jpg')
    os.utime(first, (1, 1))
    assert generate('pascal_context', root, 3, 1, SIZE, seed=0) == paths
    assert os.stat(first).st_mtime == 1  # nothing rewritten
    generate('pascal_context', root, 1, 1, SIZE, seed=0)
    # Other parameters: the old output is replaced, not mixed in.
    assert sorted(
        os.listdir(img_dir)) == ['2008_000001.jpg', '2009_000001.jpg']
    assert os.stat(first).st_mtime != 1


def test_refuses_foreign_files_and_bad_args(tmp_path):
    os.makedirs(tmp_path / 'images')
    with pytest.raises(FileExistsError, match='not written by generate'):
        generate('coco_stuff', str(tmp_path), 2, 1, SIZE)
    with pytest.raises(ValueError, match='unknown dataset kind'):
        generate('kitti', str(tmp_path / 'x'))
    with pytest.raises(ValueError, match='num_train'):
        generate('ade20k', str(tmp_path / 'y'), 0, 1, SIZE)
    with pytest.raises(ValueError, match='img_size'):
        generate('imagenet', str(tmp_path / 'z'), 1, 1, (8, 8))
    with pytest.raises(ValueError, match='segm_format'):
        generate('coco', str(tmp_path / 'w'), 1, 1, SIZE, segm_format='x')
    with pytest.raises(ValueError, match='not COCO category'):
        generate('coco', str(tmp_path / 'v'), 1, 1, SIZE, classes=['cat_'])
