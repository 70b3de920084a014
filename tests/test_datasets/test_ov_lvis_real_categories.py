"""OV-LVIS on the real LVIS v1 category list (1203 names, frequencies and
the ``speaker_(stero_equipment)`` spelling of ``lvis_v1_val.json``), through
the split tool, the embedding tool (a tiny real open_clip text tower), the
F-ViT head, the label-space check and LVISMetric."""
import importlib.util
import json
import os.path as osp
import sys
import types
from collections import Counter

import numpy as np
import pytest
import torch

from mmlocat.testing import generate
from mmlocat.testing.lvis_writer import LVIS_V1_DRAWN_IDS, lvis_v1_categories
from mmlocat.text import load_text_embeddings

TYPO = 'speaker_(stero_equipment)'  # category 655 as LVIS v1 spells it
TINY_OPEN_CLIP = dict(
    embed_dim=16,
    vision_cfg=dict(
        image_size=32, layers=1, width=32, head_width=16, patch_size=16),
    text_cfg=dict(
        context_length=77, vocab_size=49408, width=32, heads=2, layers=1))


def _tool(repo_root, rel):
    spec = importlib.util.spec_from_file_location(
        osp.basename(rel)[:-3], osp.join(repo_root, rel))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _main(monkeypatch, module, argv):
    monkeypatch.setattr(sys, 'argv', ['tool'] + [str(a) for a in argv])
    module.main()


@pytest.fixture(scope='module')
def lvis(tmp_path_factory):
    root = str(tmp_path_factory.mktemp('lvis_real'))
    paths = generate(
        'lvis', root, 3, 3, (64, 64), seed=1, categories='lvis_v1')
    return root, paths


def test_shipped_category_list():
    cats = lvis_v1_categories()
    assert [c['id'] for c in cats] == list(range(1, 1204))
    assert cats[654]['name'] == TYPO
    assert Counter(c['frequency'] for c in cats) == dict(f=405, c=461, r=337)
    from mmdet.datasets import LVISV1Dataset
    mmdet_names = LVISV1Dataset.METAINFO['classes']
    # mmdet's list differs from the real file in exactly this name.
    assert [
        i for i, (a, b) in enumerate(zip(mmdet_names, cats)) if a != b['name']
    ] == [654]
    drawn = {cats[i - 1]['frequency'] for i in LVIS_V1_DRAWN_IDS}
    assert drawn == {'f', 'c', 'r'}


def test_real_names_through_split_dump_head_and_metric(lvis, tmp_path,
                                                       repo_root, monkeypatch):
    import open_clip
    from mmdet.datasets import LVISV1Dataset

    from mmlocat.engine.hooks import OVLabelSpaceHook
    from mmlocat.evaluation.metrics.lvis_metric import NumpyCompatLVISMetric
    from mmlocat.models.det import CosineSimBBoxHead
    root, paths = lvis
    ann_dir = osp.join(root, 'annotations')
    val_file = osp.join(root, paths['val_ann_file'])
    with open(val_file) as f:
        val = json.load(f)
    assert len(val['categories']) == 1203
    assert val['categories'][654]['name'] == TYPO

    # The split tool: rare annotations go, all 1203 categories stay.
    split_dir = tmp_path / 'split'
    _main(monkeypatch,
          _tool(repo_root, 'tools/dataset_converters/make_ov_lvis.py'),
          [ann_dir, split_dir])
    with open(osp.join(ann_dir, 'lvis_v1_train.json')) as f:
        train = json.load(f)
    with open(split_dir / 'lvis_v1_train_norare.json') as f:
        norare = json.load(f)
    freq = {c['id']: c['frequency'] for c in train['categories']}
    assert norare['categories'] == train['categories']
    rare_anns = [
        a for a in train['annotations'] if freq[a['category_id']] == 'r'
    ]
    assert rare_anns, 'the generated train split should hold rare objects'
    assert [a for a in norare['annotations']] == [
        a for a in train['annotations'] if freq[a['category_id']] != 'r'
    ]

    # The embedding tool with a real (tiny, random-init) open_clip tower.
    cfg_file = tmp_path / 'tiny-clip.json'
    cfg_file.write_text(json.dumps(TINY_OPEN_CLIP))
    open_clip.add_model_config(str(cfg_file))
    torch.manual_seed(0)
    weights = tmp_path / 'tiny-clip.bin'
    torch.save(
        open_clip.create_model('tiny-clip', pretrained=None).state_dict(),
        weights)
    out = str(tmp_path / 'emb' / 'lvis-v1_tiny.npy')
    _main(monkeypatch, _tool(
        repo_root, 'tools/misc/dump_text_embeddings.py'), [
            '--ann-file', val_file, '--model-config', cfg_file, '--pretrained',
            weights, '--templates', 'single', '--background', out
        ])
    emb, bg, names = load_text_embeddings(out)
    assert emb.shape == (1203, 16) and bg is not None
    assert names == [c['name'] for c in val['categories']]
    base_file = out[:-4] + '.base.json'
    with open(base_file) as f:
        base = json.load(f)
    assert len(base) == 866 and TYPO in base

    # The head takes the 1203 names from the sidecar: the real spelling.
    head = CosineSimBBoxHead(
        text_embeddings=out,
        base_class_names=base_file,
        bg_class_weight=0.9,
        in_channels=8,
        conv_out_channels=8,
        fc_out_channels=16,
        roi_feat_size=7)
    assert head.num_classes == 1203 and head.class_names[654] == TYPO
    weight = head.loss_cls.class_weight
    assert weight.shape == (1204, ) and weight[-1].item() == pytest.approx(0.9)
    assert int((weight[:-1] == 0).sum()) == 337
    assert int(head.is_base.sum()) == 866 + 1
    # mmdet's hard-coded list disagrees with the data and is refused.
    with pytest.raises(ValueError, match=r"missing \['speaker_\(stereo_"):
        CosineSimBBoxHead(
            text_embeddings=out,
            class_names='LVISV1Dataset',
            in_channels=8,
            conv_out_channels=8,
            fc_out_channels=16)

    # The base-only train file's labels index the head's 1203 classes
    # (LVIS labels follow the file's categories, whatever mmdet spells).
    dataset = LVISV1Dataset(
        data_root=root,
        ann_file=str(split_dir / 'lvis_v1_train_norare.json'),
        data_prefix=dict(img=''),
        pipeline=[])
    model = types.SimpleNamespace(train_label_names=head.class_names)
    runner = types.SimpleNamespace(
        model=model, train_dataloader=types.SimpleNamespace(dataset=dataset))
    OVLabelSpaceHook().before_train(runner)
    runner.model = types.SimpleNamespace(train_label_names=base)
    with pytest.raises(
            ValueError,
            match=r'lvis_v1_train_norare\.json labels its 1203 categories '
            r'.*expects labels indexing 866 classes'):
        OVLabelSpaceHook().before_train(runner)

    # LVISMetric on the real names: the ground-truth boxes as predictions.
    metric = NumpyCompatLVISMetric(ann_file=val_file, metric='bbox')
    metric.dataset_meta = dict(classes=tuple(head.class_names))
    label_of = {c['id']: i for i, c in enumerate(val['categories'])}
    samples = []
    for img in val['images']:
        anns = [a for a in val['annotations'] if a['image_id'] == img['id']]
        boxes = [[x, y, x + w, y + h]
                 for x, y, w, h in (a['bbox'] for a in anns)]
        samples.append(
            dict(
                img_id=img['id'],
                ori_shape=(img['height'], img['width']),
                pred_instances=dict(
                    bboxes=torch.tensor(boxes, dtype=torch.float32),
                    scores=torch.ones(len(anns)),
                    labels=torch.tensor(
                        [label_of[a['category_id']] for a in anns]))))
    metric.process({}, samples)
    results = metric.evaluate(len(samples))
    present = {freq[a['category_id']] for a in val['annotations']}
    assert results['lvis/bbox_AP'] == pytest.approx(1.0, abs=1e-6)
    for group, key in (('r', 'APr'), ('c', 'APc'), ('f', 'APf')):
        expected = 1.0 if group in present else -1.0
        assert results[f'lvis/bbox_{key}'] == pytest.approx(
            expected, abs=1e-6), (group, results)
    assert np.isfinite(list(results.values())).all()
