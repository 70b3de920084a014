"""OV-COCO and OV-LVIS split making (mmlocat/datasets/ov_{coco,lvis}.py)."""
import copy
import json
import os.path as osp

import numpy as np
import pytest

from mmlocat.datasets.ov_coco import (OV_COCO_BASE_CLASSES, OV_COCO_CLASSES,
                                      OV_COCO_NOVEL_CLASSES,
                                      OV_COCO_TRAIN_FILE, OV_COCO_VAL_FILE,
                                      make_ov_coco_files, make_ov_coco_split,
                                      split_base_names)
from mmlocat.datasets.ov_lvis import (OV_LVIS_TRAIN_FILE, make_ov_lvis_base,
                                      make_ov_lvis_files)
from mmlocat.testing import generate
from mmlocat.text import names_from_annotations, read_class_names

# The 17 novel classes as written in docs/method.md#open-vocabulary-splits.
SPEC_NOVEL = ('airplane, bus, cat, dog, cow, elephant, umbrella, tie, '
              'snowboard, skateboard, cup, knife, cake, couch, keyboard, '
              'sink, scissors').split(', ')


@pytest.fixture(scope='module')
def coco_root(tmp_path_factory):
    root = str(tmp_path_factory.mktemp('coco'))
    # Seed 2 draws base, novel and non-OV ('traffic light') objects.
    generate('coco', root, 6, 3, (64, 64), seed=2)
    return root


@pytest.fixture(scope='module')
def lvis_root(tmp_path_factory):
    root = str(tmp_path_factory.mktemp('lvis'))
    generate('lvis', root, 6, 2, (64, 64), seed=0)
    return root


def _load(path):
    with open(path) as f:
        return json.load(f)


def _names(doc, anns=True):
    by_id = {c['id']: c['name'] for c in doc['categories']}
    if not anns:
        return [c['name'] for c in doc['categories']]
    return {by_id[a['category_id']] for a in doc['annotations']}


def test_class_lists():
    from mmdet.datasets import CocoDataset
    coco80 = list(CocoDataset.METAINFO['classes'])
    assert len(OV_COCO_BASE_CLASSES) == 48
    assert len(OV_COCO_NOVEL_CLASSES) == 17
    assert sorted(OV_COCO_NOVEL_CLASSES) == sorted(SPEC_NOVEL)
    assert not set(OV_COCO_BASE_CLASSES) & set(OV_COCO_NOVEL_CLASSES)
    both = set(OV_COCO_BASE_CLASSES) | set(OV_COCO_NOVEL_CLASSES)
    assert list(OV_COCO_CLASSES) == [n for n in coco80 if n in both]
    assert len(OV_COCO_CLASSES) == 65


def test_ov_coco_split(coco_root):
    coco = _load(
        osp.join(coco_root, 'annotations', 'instances_train2017.json'))
    before = copy.deepcopy(coco)
    src = _names(coco)
    # The tiny set has base, novel and non-OV annotations to sort.
    assert src & set(OV_COCO_BASE_CLASSES)
    assert src & set(OV_COCO_NOVEL_CLASSES)
    assert src - set(OV_COCO_CLASSES)

    base, all65 = make_ov_coco_split(coco)
    assert coco == before  # input untouched
    assert _names(
        base, anns=False) == [
            n for n in OV_COCO_CLASSES if n in OV_COCO_BASE_CLASSES
        ]
    assert {c['split'] for c in base['categories']} == {'base'}
    assert _names(base) <= set(OV_COCO_BASE_CLASSES)
    n_base = sum(
        _names(dict(coco, annotations=[a])) <= set(OV_COCO_BASE_CLASSES)
        for a in coco['annotations'])
    assert len(base['annotations']) == n_base
    # Images left without annotations are dropped, as in the real files.
    used = {a['image_id'] for a in base['annotations']}
    assert {i['id'] for i in base['images']} == used

    assert _names(all65, anns=False) == list(OV_COCO_CLASSES)
    splits = {c['name']: c['split'] for c in all65['categories']}
    assert {n
            for n, s in splits.items()
            if s == 'novel'} == set(OV_COCO_NOVEL_CLASSES)
    assert _names(all65) == src & set(OV_COCO_CLASSES)


def test_keep_novel_categories(coco_root):
    coco = _load(
        osp.join(coco_root, 'annotations', 'instances_train2017.json'))
    base, _ = make_ov_coco_split(coco, keep_novel_categories=True)
    assert _names(base, anns=False) == list(OV_COCO_CLASSES)
    assert _names(base) <= set(OV_COCO_BASE_CLASSES)


def test_generated_split_files(coco_root):
    ann = osp.join(coco_root, 'annotations')
    train = _load(osp.join(ann, OV_COCO_TRAIN_FILE))
    val = _load(osp.join(ann, OV_COCO_VAL_FILE))
    assert train == make_ov_coco_split(
        _load(osp.join(ann, 'instances_train2017.json')))[0]
    assert val == make_ov_coco_split(
        _load(osp.join(ann, 'instances_val2017.json')))[1]
    assert len(train['categories']) == 48 and len(val['categories']) == 65


def test_split_files_load_and_evaluate(coco_root):
    """mmdet reads the split files, and OVCocoMetric scores a perfect
    prediction on the all-65 val file as AP50 1.0 for base and novel."""
    import torch
    from mmdet.datasets import CocoDataset
    from mmdet.evaluation import OVCocoMetric
    from pycocotools import mask as mask_utils
    from pycocotools.coco import COCO

    train = CocoDataset(
        data_root=coco_root,
        ann_file=f'annotations/{OV_COCO_TRAIN_FILE}',
        data_prefix=dict(img='train2017/'),
        metainfo=dict(classes=OV_COCO_BASE_CLASSES),
        pipeline=[])
    labels = [
        inst['bbox_label'] for d in train.load_data_list()
        for inst in d['instances']
    ]
    assert labels and max(labels) < 48

    val_file = osp.join(coco_root, 'annotations', OV_COCO_VAL_FILE)
    gt = COCO(val_file)
    cat_ids = gt.getCatIds(catNms=list(OV_COCO_CLASSES))
    val_names = _names(_load(val_file))
    assert val_names & set(OV_COCO_NOVEL_CLASSES)
    assert val_names & set(OV_COCO_BASE_CLASSES)
    samples = []
    for img_id in gt.getImgIds():
        anns = gt.loadAnns(gt.getAnnIds(imgIds=[img_id]))
        samples.append(
            dict(
                img_id=img_id,
                ori_shape=(64, 64),
                pred_instances=dict(
                    bboxes=torch.tensor([[x, y, x + w, y + h]
                                         for x, y, w, h in (a['bbox']
                                                            for a in anns)]),
                    scores=torch.ones(len(anns)),
                    labels=torch.tensor(
                        [cat_ids.index(a['category_id']) for a in anns]),
                    masks=torch.from_numpy(
                        np.stack([
                            mask_utils.decode(gt.annToRLE(a)).astype(bool)
                            for a in anns
                        ])))))
    metric = OVCocoMetric(ann_file=val_file, metric='bbox')
    metric.dataset_meta = dict(
        classes=OV_COCO_CLASSES,
        base_classes=OV_COCO_BASE_CLASSES,
        novel_classes=OV_COCO_NOVEL_CLASSES)
    metric.process({}, samples)
    res = metric.evaluate(len(samples))
    assert res['coco/novel_ap50'] == pytest.approx(1.0)
    assert res['coco/base_ap50'] == pytest.approx(1.0)


def test_ovrcnn_seen_unseen_labels(coco_root, tmp_path):
    """OVR-CNN's split files (kept by CLIPSelf and Detic) label categories
    ``seen`` / ``unseen``: read as base / novel, never as no base class."""
    ours = _load(osp.join(coco_root, 'annotations', OV_COCO_VAL_FILE))
    relabel = dict(base='seen', novel='unseen')
    ovrcnn = copy.deepcopy(ours)
    for cat in ovrcnn['categories']:
        cat['split'] = relabel[cat['split']]
    path = tmp_path / 'instances_val2017_all_2.json'
    path.write_text(json.dumps(ovrcnn))
    names, base = names_from_annotations(_load(str(path)), str(path))
    assert names == list(OV_COCO_CLASSES)
    assert base == [n for n in OV_COCO_CLASSES if n in OV_COCO_BASE_CLASSES]
    assert (names, base) == names_from_annotations(ours)
    assert read_class_names(str(path)) == list(OV_COCO_CLASSES)
    # a label of neither scheme, a category without one, or no base class
    bad = copy.deepcopy(ovrcnn)
    bad['categories'][3]['split'] = 'train'
    with pytest.raises(ValueError, match=r"split\.json: category .*'train'"):
        names_from_annotations(bad, 'split.json')
    del bad['categories'][3]['split']
    with pytest.raises(ValueError, match='split None'):
        names_from_annotations(bad, 'split.json')
    unseen = [dict(c, split='unseen') for c in ovrcnn['categories']]
    with pytest.raises(
            ValueError,
            match=r"x\.json: no base category "
            r"\(split labels \['unseen'\]\)"):
        split_base_names(unseen, 'x.json')


def test_ov_coco_bad_input(tmp_path):
    with pytest.raises(ValueError, match="no 'annotations'"):
        make_ov_coco_split(dict(images=[], categories=[]))
    with pytest.raises(ValueError, match='lack OV-COCO classes'):
        make_ov_coco_split(
            dict(
                images=[], annotations=[], categories=[dict(id=1,
                                                            name='cat')]))
    cats = [dict(id=i, name=n) for i, n in enumerate(OV_COCO_CLASSES)]
    with pytest.raises(ValueError, match='unknown category ids'):
        make_ov_coco_split(
            dict(
                images=[],
                annotations=[dict(id=1, image_id=1, category_id=999)],
                categories=cats))
    with pytest.raises(FileNotFoundError, match='instances_train2017'):
        make_ov_coco_files(str(tmp_path), str(tmp_path))


def test_ov_lvis_base(lvis_root):
    ann = osp.join(lvis_root, 'annotations')
    lvis = _load(osp.join(ann, 'lvis_v1_train.json'))
    before = copy.deepcopy(lvis)
    rare = {c['id'] for c in lvis['categories'] if c['frequency'] == 'r'}
    assert any(a['category_id'] in rare for a in lvis['annotations'])
    base = make_ov_lvis_base(lvis)
    assert lvis == before
    assert not any(a['category_id'] in rare for a in base['annotations'])
    assert len(base['annotations']) == sum(a['category_id'] not in rare
                                           for a in lvis['annotations'])
    assert base['images'] == lvis['images']
    assert base['categories'] == lvis['categories']
    # The generator wrote the same file.
    assert _load(osp.join(ann, OV_LVIS_TRAIN_FILE)) == base


def test_ov_lvis_bad_input(tmp_path):
    with pytest.raises(ValueError, match='frequency'):
        make_ov_lvis_base(
            dict(images=[], annotations=[], categories=[dict(id=1)]))
    with pytest.raises(ValueError, match='unknown category ids'):
        make_ov_lvis_base(
            dict(
                images=[],
                annotations=[dict(id=1, image_id=1, category_id=5)],
                categories=[dict(id=1, frequency='f')]))
    with pytest.raises(ValueError, match="no 'images'"):
        make_ov_lvis_base(dict(annotations=[], categories=[]))
    with pytest.raises(FileNotFoundError, match='lvis_v1_train'):
        make_ov_lvis_files(str(tmp_path), str(tmp_path))
