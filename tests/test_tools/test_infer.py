"""tools/infer.py: PNG + JSON per image, predictions equal tools/test.py's.

For each task a tiny model derived from a shipped config is saved at random
init; ``tools/test.py --out`` dumps its predictions on a generated dataset
(batch size 1, as the inferencer runs) and ``tools/infer.py`` runs on the
same image files; both must agree exactly.
"""
import json
import os
import os.path as osp
import pickle
import sys

import cv2
import numpy as np
import pytest
import torch
from helpers.fvit import write_embeddings
from helpers.harness import run_tool
from helpers.shrink import write_tiny_config, write_tiny_ovd_config

from mmlocat.testing import generate
from mmlocat.utils.checkpoint_io import save_checkpoint
from mmlocat.visualization import class_palette
from mmlocat.visualization.labels import region_label_boxes

CLS_CONFIG = """
_base_ = {base!r}
model = dict(
    backbone=dict(
        arch=dict(_delete_=True, embed_dims=32, num_layers=2, num_heads=2,
                  feedforward_channels=64),
        img_size=32, drop_path_rate=0.),
    head=dict(num_classes=6, in_channels=32))
data_preprocessor = dict(num_classes=6)
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=36, edge='short', backend='pillow'),
    dict(type='CenterCrop', crop_size=32),
    dict(type='PackInputs'),
]
test_dataloader = dict(
    batch_size=1, num_workers=0, persistent_workers=False,
    dataset=dict(data_root={root!r}, pipeline=test_pipeline))
"""

INFER = 'tools/infer.py'
DUMP = 'tools/misc/dump_text_embeddings.py'


def _build_and_save(cfg_path, scope, ckpt, meta=None):
    from mmengine.config import Config
    from mmengine.registry import MODELS, init_default_scope
    init_default_scope(scope)
    torch.manual_seed(0)
    model = MODELS.build(Config.fromfile(cfg_path).model)
    model.init_weights()
    save_checkpoint(model.state_dict(), ckpt, meta=meta)


def _test_py_predictions(cfg, ckpt, out_pkl, work, *options):
    """tools/test.py's predictions, by image file name."""
    run_tool('tools/test.py', cfg, ckpt, '--out', out_pkl, '--work-dir', work,
             *options).ok()
    with open(out_pkl, 'rb') as f:
        return {osp.basename(p['img_path']): p for p in pickle.load(f)}


def _records(out_dir):
    """Every JSON below ``out_dir``, by its image's file name."""
    records = {}
    for path in sorted(
            osp.join(root, f) for root, _, files in os.walk(out_dir)
            for f in files if f.endswith('.json')):
        with open(path) as f:
            record = json.load(f)
        records[osp.basename(record['image'])] = record
    return records


def _infer_and_test_py(model,
                       tmp_path,
                       num_images,
                       *infer_options,
                       test_options=()):
    """tools/test.py's predictions and infer.py's records (``--out
    tmp_path/out``) of ``model``'s val images, by image file name, and
    what infer.py printed; both cover the same ``num_images`` images."""
    cfg, ckpt = model['cfg'], model['ckpt']
    ref = _test_py_predictions(cfg, ckpt, str(tmp_path / 'ref.pkl'),
                               str(tmp_path / 'work'), *test_options)
    assert len(ref) == num_images
    out = tmp_path / 'out'
    printed = run_tool(INFER, model['val_dir'], cfg, ckpt, '--out', out,
                       *infer_options).exits(0).stdout
    records = _records(str(out))
    assert sorted(records) == sorted(ref)
    return ref, records, printed


def _assert_cli_error(argv, message):
    """``infer.py ARGV`` (``argv[0]`` the program name) exits 2 with a
    one-line error naming ``message``."""
    proc = run_tool(INFER, *argv[1:]).exits(2)
    err = proc.stderr.strip().splitlines()[-1]
    assert err.startswith('infer.py: error:') and message in err, err


@pytest.mark.timeout(300)
@pytest.mark.e2e
def test_classification_png_json_equal_test_py(cls_model, tmp_path):
    cfg, ckpt = cls_model['cfg'], cls_model['ckpt']
    ref, records, printed = _infer_and_test_py(cls_model, tmp_path, 6)
    assert '6 image(s) written' in printed and '0 skipped' in printed
    for name, record in records.items():
        want = ref[name]['pred_score'].numpy()
        assert record['pred_scores'] == [float(s) for s in want]
        assert record['pred_label'] == int(want.argmax())
        assert record['pred_class'] == cls_model['classes'][int(want.argmax())]
        assert [t['label'] for t in record['topk']
                ] == list(np.argsort(-want, kind='stable')[:5])
        png = cv2.imread(record['png'])
        assert png is not None and png.shape[2] == 3

    # unreadable files in a folder are named, skipped and counted
    mixed = tmp_path / 'mixed'
    mixed.mkdir()
    good = sorted(records)[:2]
    for name in good:
        (mixed / name).write_bytes(open(records[name]['image'], 'rb').read())
    (mixed / 'broken.jpg').write_bytes(b'not an image at all')
    (mixed / 'empty.png').write_bytes(b'')
    printed = run_tool(INFER, mixed, cfg, ckpt, '--out',
                       tmp_path / 'out2').exits(1)
    assert '2 image(s) written' in printed.stdout
    assert '2 skipped' in printed.stdout
    for bad, reason in (('broken.jpg', 'cannot be decoded as an image'),
                        ('empty.png', 'empty file (0 bytes)')):
        assert f'skipped {mixed / bad}: {reason}' in printed.stderr
    assert sorted(_records(str(tmp_path / 'out2'))) == sorted(good)

    # a checkpoint that leaves weights random is refused, as by test.py
    state = torch.load(ckpt, weights_only=False)
    state['state_dict'].pop('head.layers.head.weight')
    partial = str(tmp_path / 'partial.pth')
    torch.save(state, partial)
    for argv, message in (
        ([mixed, cfg, partial], 'head.layers.head.weight'),
        ([mixed, cfg, tmp_path / 'missing.pth'], 'file not found'),
        ([mixed, cfg, ckpt, '--classes', 'cat'], 'open-vocabulary'),
    ):
        _assert_cli_error(['infer.py'] + [str(a) for a in argv], message)


@pytest.fixture(scope='module')
def seg_model(repo_root, tmp_path_factory):
    """A tiny random-init UperNet + LocAtViT (150 ADE20K classes) derived
    from the shipped config, and its generated validation images."""
    tmp = tmp_path_factory.mktemp('seg')
    paths = generate('ade20k', str(tmp / 'ade'), 1, 2, (64, 96), seed=0)
    root = paths['data_root']
    cfg = write_tiny_config(
        osp.join(repo_root, 'configs/locat/upernet_locat-b_ade20k.py'),
        str(tmp / 'seg.py'), root)
    ckpt = str(tmp / 'seg.pth')
    _build_and_save(cfg, 'mmseg', ckpt)  # no dataset_meta: config's used
    return dict(
        cfg=cfg, ckpt=ckpt, val_dir=osp.join(root, paths['val_img_dir']))


@pytest.mark.timeout(300)
@pytest.mark.e2e
def test_segmentation_png_json_equal_test_py(seg_model, tmp_path):
    ref, records, _ = _infer_and_test_py(seg_model, tmp_path, 2)
    out = tmp_path / 'out'
    from mmseg.datasets import ADE20KDataset
    names = ADE20KDataset.METAINFO['classes']
    for name, record in records.items():
        assert record['label_png'] == osp.join(out, name + '.labels.png')
        assert record['png'] == osp.join(out, name + '.png')
        want = ref[name]['pred_sem_seg']['data'][0].numpy()
        got = cv2.imread(record['label_png'], cv2.IMREAD_UNCHANGED)
        np.testing.assert_array_equal(got, want)
        present, counts = np.unique(want, return_counts=True)
        assert [
            (c['label'], c['cls'], c['pixels']) for c in record['classes']
        ] == [(int(c), names[c], int(n)) for c, n in zip(present, counts)]
        png = cv2.imread(record['png'])
        assert png is not None and png.shape[2] == 3


@pytest.fixture(scope='module')
def coco_fvit(repo_root, tmp_path_factory):
    """A tiny random-init OV-COCO F-ViT config and checkpoint."""
    from mmlocat.text import names_from_annotations
    tmp = tmp_path_factory.mktemp('fvit')
    paths = generate('coco', str(tmp / 'coco'), 2, 2, (64, 64), seed=2)
    root = paths['data_root']
    val_ann = osp.join(root, paths['ov_val_ann_file'])
    with open(val_ann) as f:
        names, _ = names_from_annotations(json.load(f))
    emb = write_embeddings(tmp / 'coco_emb.npy', names)
    cfg = write_tiny_ovd_config(
        tmp / 'fvit.py',
        osp.join(repo_root, 'configs/ovd/fvit_clip-b16_ov-coco.py'), root, emb,
        val_ann)
    ckpt = str(tmp / 'fvit.pth')
    _build_and_save(cfg, 'mmdet', ckpt)
    return dict(
        cfg=cfg,
        ckpt=ckpt,
        root=root,
        names=names,
        tmp=tmp,
        val_dir=osp.join(root, paths['val_img_dir']))


@pytest.mark.timeout(300)
@pytest.mark.e2e
def test_detection_png_json_equal_test_py(coco_fvit, tmp_path):
    ref, records, _ = _infer_and_test_py(
        coco_fvit,
        tmp_path,
        2,
        '--score-thr',
        '0',
        test_options=['--cfg-options', 'test_dataloader.batch_size=1'])
    for name, record in records.items():
        want = ref[name]['pred_instances']
        inst = record['instances']
        assert len(inst) == len(want['scores']) > 0
        assert [i['bbox'] for i in inst] == want['bboxes'].tolist()
        assert [i['score'] for i in inst] == want['scores'].tolist()
        assert [i['label'] for i in inst] == want['labels'].tolist()
        assert [i['cls'] for i in inst
                ] == [coco_fvit['names'][i] for i in want['labels'].tolist()]
        assert cv2.imread(record['png']) is not None


TINY_CLIP = dict(
    embed_dim=16,
    vision_cfg=dict(
        image_size=32, layers=1, width=32, head_width=16, patch_size=16),
    text_cfg=dict(
        context_length=77, vocab_size=49408, width=32, heads=2, layers=1))


@pytest.fixture(scope='module')
def tiny_clip(coco_fvit):
    """A random-init open_clip model (16-d joint space, F-ViT's width in
    the tiny config) saved as a user's weights file, and the F-ViT's COCO
    embeddings dumped with its text tower by the dump tool (so the sidecar
    records the text model)."""
    import open_clip
    tmp = coco_fvit['tmp']
    model_cfg = tmp / 'tiny-clip16.json'
    model_cfg.write_text(json.dumps(TINY_CLIP))
    open_clip.add_model_config(str(model_cfg))
    torch.manual_seed(0)
    model = open_clip.create_model('tiny-clip16', pretrained=None).eval()
    emb_dir = tmp / 'emb'
    emb_dir.mkdir()
    weights = str(emb_dir / 'tiny-clip16.bin')
    torch.save(model.state_dict(), weights)

    def run_dump(names, out):
        names_file = tmp / (osp.basename(out) + '.txt')
        names_file.write_text('\n'.join(names) + '\n')
        run_tool(DUMP, '--names', names_file, '--model-config', model_cfg,
                 '--pretrained', weights, '--background', out).ok()
        return np.load(out)

    emb = str(emb_dir / 'coco_tiny-clip.npy')
    run_dump(coco_fvit['names'], emb)
    cfg = tmp / 'fvit_recorded.py'
    cfg.write_text(f'_base_ = {coco_fvit["cfg"]!r}\n'
                   f'model = dict(roi_head=dict(bbox_head=dict('
                   f'text_embeddings={emb!r})))\n')
    return dict(
        model_cfg=str(model_cfg),
        weights=weights,
        cfg=str(cfg),
        run_dump=run_dump,
        model=model)


VOCAB = ['person', 'cat', 'remote control']


@pytest.mark.timeout(300)
def test_classes_at_run_time_real_open_clip(coco_fvit, tiny_clip, tmp_path,
                                            monkeypatch):
    from mmlocat.apis import MMLocatInferencer
    from mmlocat.text import cache as text_cache
    cache = tmp_path / 'cache'
    out = tmp_path / 'out'
    printed = run_tool(INFER, coco_fvit['val_dir'], tiny_clip['cfg'],
                       coco_fvit['ckpt'], '--out', out, '--classes',
                       ', '.join(VOCAB) + ',', '--score-thr', '0',
                       '--text-model-config', tiny_clip['model_cfg'],
                       '--vocab-cache', cache).exits(0)
    assert '2 image(s) written' in printed.stdout
    records = _records(str(out))
    assert len(records) == 2
    labelled = [i['cls'] for r in records.values() for i in r['instances']]
    assert labelled and set(labelled) <= set(VOCAB)
    for record in records.values():
        assert record['classes'] == VOCAB
        assert all(0 <= i['label'] < 3 for i in record['instances'])

    # the head's classifier (and with it the CLIP score fusion) holds the
    # dump tool's embeddings of the typed names; OV-COCO's base 'person'
    # keeps alpha, the others are novel (beta)
    want = tiny_clip['run_dump'](VOCAB, str(tmp_path / 'ref.npy'))

    def no_encoder(*args):
        raise AssertionError('the cached vocabulary was encoded again')

    monkeypatch.setattr(text_cache, 'open_clip_encoder', no_encoder)
    inferencer = MMLocatInferencer(
        tiny_clip['cfg'],
        coco_fvit['ckpt'],
        classes=VOCAB,
        text_model_config=tiny_clip['model_cfg'],
        vocab_cache=str(cache))
    head = inferencer.model.roi_head.bbox_head
    assert head.class_names == VOCAB == inferencer.classes
    np.testing.assert_allclose(
        head.classifier_weights().numpy(), want, atol=1e-6, rtol=0)
    assert head.is_base.tolist() == [True, False, False, True]
    fused = head.vlm_scores(torch.from_numpy(want[:3]))
    assert fused.shape == (3, 4)  # 3 typed classes + background
    assert fused.argmax(1).tolist() == [0, 1, 2]


@pytest.mark.timeout(300)
def test_classes_bad_input(coco_fvit, tiny_clip, tmp_path):
    img = coco_fvit['val_dir']
    cases = (
        ([img, tiny_clip['cfg'], coco_fvit['ckpt'], '--classes',
          ' , '], 'empty class list'),
        # issue 34: one grammar; a named list's typo is not one class
        ([
            img, coco_fvit['cfg'], coco_fvit['ckpt'], '--classes',
            'imagenet_openclip'
        ], "'imagenet_openclip' is neither a class-name "
         'file, a named list'),
        # random embeddings without a recorded text model
        ([img, coco_fvit['cfg'], coco_fvit['ckpt'], '--classes',
          'cat'], 'pass --text-model'),
        ([
            img, coco_fvit['cfg'], coco_fvit['ckpt'], '--classes', 'cat',
            '--text-model', 'tiny-clip16'
        ], 'pass --text-weights'),
        ([
            img, tiny_clip['cfg'], coco_fvit['ckpt'], '--classes', 'cat',
            '--text-model-config', tiny_clip['model_cfg'], '--text-weights',
            coco_fvit['ckpt']
        ], f"{coco_fvit['ckpt']} holds no CLIP text tower but "),
    )
    for argv, message in cases:
        _assert_cli_error(['infer.py'] + [str(a) for a in argv] +
                          ['--vocab-cache', str(tmp_path)], message)


def test_class_names_of_another_label_space_are_not_used():
    from mmlocat.apis.inferencer import ClassificationHandler

    class Head:
        num_classes = 3

    class Model:
        head = Head()

    handler = ClassificationHandler.__new__(ClassificationHandler)
    handler.model = Model()
    handler.meta = dict(classes=['a', 'b', 'c'])
    assert handler.classes == ['a', 'b', 'c']
    handler.meta = dict(classes=[str(i) for i in range(1000)])
    assert handler.classes is None


@pytest.fixture(scope='module')
def zero_shot(repo_root, tmp_path_factory, load_tool):
    """A tiny random-init COCO-Object zero-shot config in mmlocat's earlier
    protocol (background by the constant ``bg_thresh`` channel, one name
    per class, instance-based maps), its embeddings written by the dump
    tool with a random-init open_clip model (so the sidecar records the
    text model) and the tower converted from the same open_clip file."""
    import open_clip
    zs = load_tool('tests/test_e2e/test_zero_shot_e2e.py', 'zs_e2e')
    tmp = tmp_path_factory.mktemp('zs')
    model_cfg = tmp / 'tiny-zs-infer.json'
    model_cfg.write_text(json.dumps(zs.TINY_CLIP))
    open_clip.add_model_config(str(model_cfg))
    torch.manual_seed(0)
    weights = str(tmp / 'tiny-zs-infer.bin')
    torch.save(open_clip.create_model('tiny-zs-infer').state_dict(), weights)
    paths = generate('coco_object', str(tmp / 'data'), 1, 2, (40, 48))
    prefix = (f"data_prefix=dict(img_path={paths['val_img_dir']!r}, "
              f"seg_map_path={paths['val_seg_dir']!r}),")
    emb = str(tmp / 'emb.npy')
    cfg = zs._derive(
        tmp,
        repo_root,
        None,
        paths['data_root'],
        emb,
        prefix,
        bases=[
            '_base_/zeroshot_clip-b16.py',
            '_base_/zeroshot_coco-object_mmlocat.py'
        ])

    def run_dump(out, *source):
        run_tool(DUMP, *source, '--model-config', model_cfg, '--pretrained',
                 weights, '--templates', 'imagenet80', '--prompt-style',
                 'plain', out).ok()
        return np.load(out)

    run_dump(emb, '--seg-config', str(cfg))
    # the tower converted from the same CLIP file (both record it)
    ckpt = tmp / 'tower.pth'
    run_tool('tools/model_converters/clip2mmlocat.py', '--model-config',
             model_cfg, weights, ckpt).ok()
    return dict(
        cfg=str(cfg),
        ckpt=str(ckpt),
        model_cfg=str(model_cfg),
        weights=weights,
        run_dump=run_dump,
        random_checkpoint=zs._random_checkpoint,
        val_dir=osp.join(paths['data_root'], paths['val_img_dir']))


@pytest.mark.timeout(300)
@pytest.mark.e2e
def test_zero_shot_png_json_equal_test_py(zero_shot, tmp_path):
    from mmlocat.datasets import COCOObjectDataset
    cfg, ckpt = zero_shot['cfg'], zero_shot['ckpt']
    ref, records, printed = _infer_and_test_py(zero_shot, tmp_path, 2)
    assert '2 image(s) written' in printed
    names = COCOObjectDataset.METAINFO['classes']
    assert names[0] == 'background' and len(names) == 81
    for name, record in records.items():
        assert record['task'] == 'zero-shot segmentation'
        want = ref[name]['pred_sem_seg']['data'][0].numpy()
        got = cv2.imread(record['label_png'], cv2.IMREAD_UNCHANGED)
        np.testing.assert_array_equal(got, want)
        present, counts = np.unique(want, return_counts=True)
        assert [
            (c['label'], c['cls'], c['pixels']) for c in record['classes']
        ] == [(int(c), names[c], int(n)) for c, n in zip(present, counts)]
        png = cv2.imread(record['png'])
        assert png is not None and png.shape[2] == 3
    # bg_thresh at work: background and object pixels
    labels = {c['label'] for r in records.values() for c in r['classes']}
    assert 0 in labels and len(labels) > 1

    # embeddings of other classes than the dataset's: refused as by test.py
    other = str(tmp_path / 'other.npy')
    (tmp_path / 'names.txt').write_text('cat\ndog\n')
    zero_shot['run_dump'](other, '--names', str(tmp_path / 'names.txt'))
    for argv, message in (
        (['--cfg-options', f'model.text_embeddings={other}'],
         'do not match the dataset classes'),
        (['--classes', 'cat, background'], 'reserved'),
    ):
        _assert_cli_error([
            'infer.py', zero_shot['val_dir'], cfg, ckpt, '--out',
            str(tmp_path / 'bad')
        ] + argv, message)
    # a tower that cannot be paired with the embeddings: refused as by
    # test.py (it ran before: infer.py never checked the tower it loaded)
    bare = str(tmp_path / 'bare.pth')
    zero_shot['random_checkpoint'](cfg, bare)  # no records
    _assert_cli_error([
        'infer.py', zero_shot['val_dir'], cfg, bare, '--out',
        str(tmp_path / 'bare')
    ], f"{bare} records no CLIP (meta['clip'])")


@pytest.mark.timeout(300)
def test_zero_shot_classes_at_run_time_real_open_clip(zero_shot, tmp_path):
    from mmlocat.apis import MMLocatInferencer
    cfg, ckpt = zero_shot['cfg'], zero_shot['ckpt']
    cache = tmp_path / 'cache'
    out = tmp_path / 'out'
    # the sidecar records the text model; its weights lie next to it
    run_tool(INFER, zero_shot['val_dir'], cfg, ckpt, '--out', out, '--classes',
             ', '.join(VOCAB), '--text-model-config', zero_shot['model_cfg'],
             '--vocab-cache', cache).exits(0)
    records = _records(str(out))
    assert len(records) == 2
    # bg_thresh kept: label 0 is background, the typed names follow
    names = ['background'] + VOCAB
    assert {c['cls']
            for r in records.values()
            for c in r['classes']} == set(names)
    for record in records.values():
        got = cv2.imread(record['label_png'], cv2.IMREAD_UNCHANGED)
        assert set(np.unique(got)) <= set(range(4))
        assert [c['cls'] for c in record['classes']
                ] == [names[c['label']] for c in record['classes']]

    # the segmentor holds the dump tool's embeddings of the typed names
    # (imagenet80, plain prompts, no background row) and predicts what a
    # config made with that file predicts
    ref = str(tmp_path / 'ref.npy')
    (tmp_path / 'vocab.txt').write_text('\n'.join(VOCAB) + '\n')
    want = zero_shot['run_dump'](ref, '--names', str(tmp_path / 'vocab.txt'))
    typed = MMLocatInferencer(cfg, ckpt, classes=VOCAB, vocab_cache=str(cache))
    assert typed.model.class_names == VOCAB and typed.classes == names
    np.testing.assert_allclose(
        typed.model.text_embeddings.numpy(), want, atol=1e-6, rtol=0)
    dumped = MMLocatInferencer(
        cfg,
        ckpt,
        cfg_options={
            'model.text_embeddings': ref,
            'test_dataloader.dataset.metainfo': dict(classes=names)
        })
    for a, b in zip(
            typed(zero_shot['val_dir'])['predictions'],
            dumped(zero_shot['val_dir'])['predictions']):
        assert a['classes'] == b['classes']
        assert torch.equal(a['data_sample'].pred_sem_seg.data,
                           b['data_sample'].pred_sem_seg.data)
        np.testing.assert_array_equal(
            cv2.imread(records[osp.basename(a['image'])]['label_png'],
                       cv2.IMREAD_UNCHANGED),
            a['data_sample'].pred_sem_seg.data[0].numpy())

    # recorded only in the tower checkpoint's meta['clip'] (as the
    # converter writes it, no prompts): imagenet80 templates, plain prompts
    from mmlocat.utils.records import clip_provenance
    state = torch.load(ckpt, weights_only=False)
    # (the recorded weights are found next to the checkpoint)
    meta_ckpt = osp.join(osp.dirname(zero_shot['weights']), 'meta.pth')
    save_checkpoint(
        state['state_dict'],
        meta_ckpt,
        meta=dict(clip=clip_provenance('tiny-zs-infer', zero_shot['weights'])))
    from_meta = MMLocatInferencer(
        cfg,
        meta_ckpt,
        classes=VOCAB,
        vocab_cache=str(tmp_path / 'cache2'),
        cfg_options={'model.text_embeddings': str(tmp_path / 'none.npy')})
    np.testing.assert_allclose(
        from_meta.model.text_embeddings.numpy(), want, atol=1e-6, rtol=0)

    # without bg_thresh every pixel is one of the typed names
    plain = MMLocatInferencer(
        cfg,
        ckpt,
        classes=VOCAB,
        vocab_cache=str(cache),
        cfg_options={'model.bg_thresh': None})
    assert plain.classes == VOCAB
    result = plain(zero_shot['val_dir'])['predictions']
    assert {c['cls'] for r in result for c in r['classes']} <= set(VOCAB)
    # one embedding file served all three (no background row in it)
    assert len(list(cache.glob('*.npy'))) == 1


@pytest.mark.timeout(300)
def test_zero_shot_classes_a_named_list(zero_shot, tmp_path):
    """Issue 34: ``--classes imagenet_open_clip`` became one class named
    ``imagenet_open_clip``; it is the list's 1000 names (two of them twice,
    as shipped: their rows are equal)."""
    from mmlocat.text.class_names import imagenet_class_names
    cfg, ckpt = zero_shot['cfg'], zero_shot['ckpt']
    out = tmp_path / 'out'
    run_tool(INFER, zero_shot['val_dir'], cfg, ckpt, '--out', out, '--classes',
             'imagenet_open_clip', '--text-model-config',
             zero_shot['model_cfg'], '--vocab-cache',
             tmp_path / 'cache').exits(0)
    names = ['background'] + imagenet_class_names('open_clip')
    records = _records(str(out))
    assert len(records) == 2
    for record in records.values():
        assert [c['cls'] for c in record['classes']
                ] == [names[c['label']] for c in record['classes']]
    rows = np.load(next((tmp_path / 'cache').glob('*.npy')))
    assert rows.shape[0] == 1000


def _labels_alone(inferencer, path):
    """The label map of one image predicted on its own (nothing written)."""
    result = inferencer(path)['predictions'][0]
    return result['data_sample'].pred_sem_seg.data[0].numpy()


@pytest.mark.timeout(300)
def test_output_names_cannot_collide(seg_model, tmp_path):
    """``x.jpg`` and ``x_labels.jpg`` overwrote each other's outputs (the
    label map of one, the picture of the other); names below the input
    folder are kept, and what would still collide is refused first."""
    from mmlocat.apis import MMLocatInferencer
    cfg, ckpt = seg_model['cfg'], seg_model['ckpt']
    val = sorted(os.listdir(seg_model['val_dir']))
    folder = tmp_path / 'photos'
    (folder / 'sub').mkdir(parents=True)
    sources = {
        'x.jpg': val[0],
        'x_labels.jpg': val[1],
        'x.png': val[1],  # same stem as x.jpg, other extension
        'sub/x.jpg': val[1],  # same name in a subfolder
    }
    for name, src in sources.items():
        img = cv2.imread(osp.join(seg_model['val_dir'], src))
        if name == 'x.png':
            img = img[:, ::-1]  # another picture
        cv2.imwrite(str(folder / name), img)
    out = tmp_path / 'out'
    printed = run_tool(INFER, folder, cfg, ckpt, '--out', out).exits(0)
    assert '4 image(s) written' in printed.stdout
    written = sorted(
        osp.relpath(osp.join(root, f), out) for root, _, files in os.walk(out)
        for f in files)
    assert written == sorted(name + suffix for name in sources
                             for suffix in ('.png', '.json', '.labels.png'))
    inferencer = MMLocatInferencer(cfg, ckpt)
    for name in sources:
        with open(out / (name + '.json')) as f:
            record = json.load(f)
        assert record['image'] == str(folder / name)
        np.testing.assert_array_equal(
            cv2.imread(
                str(out / (name + '.labels.png')), cv2.IMREAD_UNCHANGED),
            _labels_alone(inferencer, str(folder / name)))

    # the same relative name under two input folders: refused, nothing
    # written; so is an output that would overwrite an input image
    other = tmp_path / 'other'
    other.mkdir()
    cv2.imwrite(str(other / 'x.jpg'), cv2.imread(str(folder / 'x.jpg')))
    cv2.imwrite(str(other / 'x.jpg.png'), cv2.imread(str(folder / 'x.jpg')))
    for argv, message in (
        ([folder, other, cfg, ckpt, '--out', tmp_path / 'out2'],
         f'{folder / "x.jpg"} and {other / "x.jpg"} would both write '
         f'{tmp_path / "out2" / "x.jpg.png"}'),
        ([other, cfg, ckpt, '--out', other],
         f'the output {other / "x.jpg.png"} of {other / "x.jpg"} would '
         f'overwrite the input image {other / "x.jpg.png"}'),
    ):
        before = sorted(os.listdir(other))
        _assert_cli_error(['infer.py'] + [str(a) for a in argv], message)
        assert not (tmp_path / 'out2').exists()
        assert sorted(os.listdir(other)) == before

    # an output folder inside the input folder is not searched: a second
    # run there predicts the same 4 images again
    for _ in range(2):
        printed = run_tool(INFER, folder, cfg, ckpt, '--out',
                           folder / 'results').exits(0)
        assert '4 image(s) written' in printed.stdout
    assert len(os.listdir(folder / 'results')) == 3 * 3 + 1  # + sub/


def test_plan_outputs():
    from mmlocat.apis.inferencer import plan_outputs
    suffixes = ('.png', '.json', '.labels.png')
    # an input named like another one's output (possible only for files
    # given directly, which may lack an image extension) is caught
    with pytest.raises(ValueError, match='would both write o/x.labels.png'):
        plan_outputs([('a/x', 'x'), ('b/x.labels', 'x.labels')], 'o', suffixes)
    assert plan_outputs([('a/x.jpg', 'x.jpg'), ('a/x.png', 'x.png')], 'o',
                        suffixes) == ['o/x.jpg', 'o/x.png']


@pytest.fixture(scope='module')
def cls_model(repo_root, tmp_path_factory):
    """A tiny random-init LocAtViT classifier (6 classes) derived from the
    shipped config, and its generated validation folder."""
    tmp = tmp_path_factory.mktemp('cls')
    paths = generate(
        'imagenet', str(tmp / 'in'), 1, 1, (40, 48), seed=0, num_classes=6)
    cfg = tmp / 'cls.py'
    cfg.write_text(
        CLS_CONFIG.format(
            base=osp.join(repo_root, 'configs/locat/locat-t_8xb128_in1k.py'),
            root=paths['data_root']))
    ckpt = str(tmp / 'cls.pth')
    _build_and_save(
        str(cfg),
        'mmpretrain',
        ckpt,
        meta=dict(dataset_meta=dict(classes=paths['classes'])))
    return dict(
        cfg=str(cfg),
        ckpt=ckpt,
        val_dir=osp.join(paths['data_root'], 'val'),
        classes=paths['classes'])


def test_checkpoint_errors_as_test_py(cls_model, tmp_path):
    """A 0-byte checkpoint ended infer.py in a raw EOFError; every bad file
    now gets the sentence tools/test.py prints (the same reader), before
    anything is built."""
    from mmlocat.utils.checkpoint_io import read_state_dict
    ckpt = cls_model['ckpt']
    data = open(ckpt, 'rb').read()
    state = torch.load(ckpt, weights_only=False)
    state['state_dict']['head.layers.head.weight'][0, 0] = float('nan')
    bad = {
        'empty.pth': b'',
        'truncated.pth': data[:len(data) // 2],
        'text.pth': b'not a checkpoint\n',
    }
    for name, content in bad.items():
        (tmp_path / name).write_bytes(content)
    torch.save(state, str(tmp_path / 'nan.pth'))
    for name in list(bad) + ['nan.pth']:
        path = str(tmp_path / name)
        with pytest.raises(ValueError) as want:
            read_state_dict(path)
        _assert_cli_error(
            ['infer.py', cls_model['val_dir'], cls_model['cfg'], path],
            str(want.value))


def _repeat(img, k):
    return np.repeat(np.repeat(img, k, axis=0), k, axis=1)


@pytest.mark.timeout(300)
def test_large_image_bounded_by_max_side(seg_model, tmp_path):
    """A 6000x4000 image through a 150-class segmentor: predicted at
    ``--max-side`` and its label map mapped back (nearest) to 6000x4000.
    The image is a 600x400 one with every pixel repeated 10x10, so the
    downscaled copy is that image exactly and the result must be its label
    map, repeated."""
    from mmlocat.apis import MMLocatInferencer
    cfg, ckpt = seg_model['cfg'], seg_model['ckpt']
    src = cv2.imread(
        osp.join(seg_model['val_dir'],
                 sorted(os.listdir(seg_model['val_dir']))[0]))
    small = cv2.resize(src, (600, 400), interpolation=cv2.INTER_LINEAR)
    cv2.imwrite(str(tmp_path / 'small.png'), small)
    (tmp_path / 'big').mkdir()
    big = str(tmp_path / 'big' / 'big.png')
    cv2.imwrite(big, _repeat(small, 10))
    out = tmp_path / 'out'
    run_tool(INFER, big, cfg, ckpt, '--out', out, '--max-side', 600).exits(0)
    with open(out / 'big.png.json') as f:
        record = json.load(f)
    assert record['shape'] == [4000, 6000]
    assert record['inference_shape'] == [400, 600]
    inferencer = MMLocatInferencer(cfg, ckpt, max_side=0)
    want = _labels_alone(inferencer, str(tmp_path / 'small.png'))
    got = cv2.imread(str(out / 'big.png.labels.png'), cv2.IMREAD_UNCHANGED)
    np.testing.assert_array_equal(got, _repeat(want, 10))
    present, counts = np.unique(want, return_counts=True)
    assert [(c['label'], c['pixels']) for c in record['classes']
            ] == [(int(c), 100 * int(n)) for c, n in zip(present, counts)]
    # the picture is drawn at the inference size
    assert cv2.imread(str(out / 'big.png.png')) is not None

    # segmentation bounds images by default; the other tasks do not
    assert MMLocatInferencer(cfg, ckpt).max_side == 2048
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match='max_side must be an int >= 0'):
            MMLocatInferencer(cfg, ckpt, max_side=bad)


@pytest.mark.timeout(300)
def test_large_image_boxes_mapped_back(coco_fvit, tmp_path):
    """Detection past ``max_side``: boxes in the image's coordinates (a 4x
    pixel-repeated image gives 4x the boxes of the original)."""
    from mmlocat.apis import MMLocatInferencer
    name = sorted(os.listdir(coco_fvit['val_dir']))[0]
    path = osp.join(coco_fvit['val_dir'], name)
    img = cv2.imread(path)
    big = str(tmp_path / 'big.png')
    cv2.imwrite(big, _repeat(img, 4))
    inferencer = MMLocatInferencer(
        coco_fvit['cfg'], coco_fvit['ckpt'], max_side=max(img.shape[:2]))
    assert MMLocatInferencer(coco_fvit['cfg'],
                             coco_fvit['ckpt']).max_side is None
    want = inferencer(path)['predictions'][0]
    got = inferencer(big)['predictions'][0]
    assert got['inference_shape'] == list(img.shape[:2])
    assert len(got['instances']) == len(want['instances']) > 0
    for a, b in zip(got['instances'], want['instances']):
        assert a['bbox'] == [4 * v for v in b['bbox']]
        assert (a['label'], a['score']) == (b['label'], b['score'])
    assert got['data_sample'].ori_shape == (4 * img.shape[0], 4 * img.shape[1])


LIMITED = """
import os, resource, runpy, sys
import torch, mmseg.apis, mmlocat.apis  # imported outside the cap
with open('/proc/self/status') as f:
    size = next(int(line.split()[1]) * 1024 for line in f
                if line.startswith('VmSize'))
cap = size + 1024 * 2**20  # 1 GiB more address space than after imports
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
runs = sys.argv[1:]
for max_side in ('0', '512'):
    sys.argv = ['infer.py'] + runs + ['--max-side', max_side]
    try:
        runpy.run_path('tools/infer.py', run_name='__main__')
        code = 0
    except SystemExit as exc:
        code = exc.code
    print(f'EXIT {max_side} {code}', flush=True)
"""


def test_is_out_of_memory_on_real_allocation_failures():
    """What numpy, torch's CPU allocator and OpenCV raise for 1 EiB."""
    from mmlocat.apis.inferencer import is_out_of_memory
    failures = (
        lambda: np.empty(1 << 60, np.uint8),
        lambda: torch.empty(1 << 60, dtype=torch.uint8),
        lambda: cv2.resize(np.zeros((4, 4), np.uint8), (1 << 20, 1 << 20)),
    )
    for allocate in failures:
        with pytest.raises(Exception) as exc:
            allocate()
        assert is_out_of_memory(exc.value), exc.value
    assert not is_out_of_memory(ValueError('bad value'))
    assert not is_out_of_memory(RuntimeError('size mismatch'))


@pytest.mark.timeout(600)
@pytest.mark.skipif(
    not sys.platform.startswith('linux'), reason='RLIMIT_AS, /proc')
@pytest.mark.e2e
def test_out_of_memory_is_named_counted_and_skipped(seg_model, tmp_path):
    """A real allocation failure: the tool runs with 1 GiB of address space
    to spare; 150 x 1600 x 2400 float logits (2.3 GB) cannot be allocated.
    Without a limit that image is named, counted and skipped and the next
    one is still predicted (exit 1); with ``--max-side 512`` both run."""
    cfg, ckpt = seg_model['cfg'], seg_model['ckpt']
    folder = tmp_path / 'photos'
    folder.mkdir()
    val = sorted(os.listdir(seg_model['val_dir']))
    img = cv2.imread(osp.join(seg_model['val_dir'], val[0]))
    cv2.imwrite(
        str(folder / 'a_big.jpg'),
        cv2.resize(img, (2400, 1600), interpolation=cv2.INTER_LINEAR))
    cv2.imwrite(str(folder / 'b.jpg'), img)
    script = tmp_path / 'limited.py'
    script.write_text(LIMITED)
    proc = run_tool(
        str(script),
        folder,
        cfg,
        ckpt,
        '--out',
        tmp_path / 'out',
        isolate='RLIMIT_AS caps the whole process: the test '
        'process must keep its address space',
        env=dict(PYTHONUNBUFFERED='1'),
        merge_stderr=True)  # in order
    text = proc.output
    assert proc.returncode == 0, text[-3000:]
    first, second = text.split('EXIT 0 ')
    assert second.startswith('1') and 'EXIT 512 0' in second, text[-3000:]
    assert (f'infer.py: skipped {folder / "a_big.jpg"}: out of memory at '
            '2400x1600 (max_side=0): ') in first
    assert "can't allocate memory" in first and '--max-side' in first
    assert '1 image(s) written' in first
    assert '1 skipped (1 out of memory)' in first
    assert '2 image(s) written' in second and '0 skipped' in second


def _drill_images(src, folder):
    """One image in the formats a user may have, and three broken files;
    returns the RGB array each good file must decode to."""
    from PIL import Image
    folder.mkdir()
    bgr = cv2.imread(src)
    rgb = np.ascontiguousarray(bgr[..., ::-1])
    Image.fromarray(rgb).convert('L').save(folder / 'gray.jpg')
    Image.fromarray(rgb).convert('CMYK').save(folder / 'cmyk.jpg')
    cv2.imwrite(str(folder / 'deep16.png'), bgr.astype(np.uint16) * 257)
    alpha = np.tile(
        np.linspace(0, 255, rgb.shape[1]).astype(np.uint8), (rgb.shape[0], 1))
    Image.fromarray(np.dstack([rgb, alpha]), 'RGBA').save(folder / 'rgba.png')
    exif = Image.Image().getexif()
    exif[0x0112] = 6  # stored sideways: rotate 90 degrees clockwise
    Image.fromarray(rgb).save(folder / 'exif6.jpg', exif=exif.tobytes())
    data = open(src, 'rb').read()
    (folder / 'truncated.jpg').write_bytes(data[:len(data) * 9 // 10])
    (folder / 'empty.jpg').write_bytes(b'')
    (folder / 'text.png').write_bytes(b'hello\n')
    return {
        'deep16.png': rgb,  # 16-bit: v * 257 -> v
        'rgba.png': rgb,  # alpha dropped
        'exif6.jpg': None,  # JPEG: compared by shape
        'gray.jpg': None,
        'cmyk.jpg': None,
    }


DRILL_NOTES = {
    'deep16.png': '16-bit samples reduced to 8 bits',
    'rgba.png': 'alpha channel ignored',
    'exif6.jpg': 'EXIF orientation 6 applied',
    'gray.jpg': 'grayscale: one channel repeated to RGB',
    'cmyk.jpg': 'CMYK converted to RGB',
}
DRILL_SKIPPED = {
    'truncated.jpg': 'cannot be decoded as an image',
    'empty.jpg': 'empty file (0 bytes)',
    'text.png': 'cannot be decoded as an image (6 bytes',
}


@pytest.mark.timeout(600)
def test_image_kinds_through_every_task(seg_model, cls_model, coco_fvit,
                                        zero_shot, tmp_path):
    """Grayscale, CMYK, 16-bit, RGBA and EXIF-rotated images are predicted
    as the hosts decode them (the JSON says what decoding changed);
    truncated, empty and non-image files are named, skipped and counted,
    and the run exits 1; for every task."""
    import mmcv

    from mmlocat.apis import MMLocatInferencer
    src = osp.join(seg_model['val_dir'],
                   sorted(os.listdir(seg_model['val_dir']))[0])
    folder = tmp_path / 'drill'
    decoded = _drill_images(src, folder)
    h, w = cv2.imread(src).shape[:2]
    for name, want in decoded.items():
        got = mmcv.imread(str(folder / name), channel_order='rgb')
        shape = (w, h, 3) if name == 'exif6.jpg' else (h, w, 3)
        assert got.shape == shape, name
        if want is not None:
            np.testing.assert_array_equal(got, want)
    models = {
        'classification': cls_model,
        'segmentation': seg_model,
        'detection': coco_fvit,
        'zero-shot segmentation': zero_shot,
    }
    for task, model in models.items():
        out = tmp_path / task.replace(' ', '_')
        printed = run_tool(INFER, folder, model['cfg'], model['ckpt'], '--out',
                           out).exits(1)
        assert '5 image(s) written' in printed.stdout, task
        assert '3 skipped' in printed.stdout, task
        for name, reason in DRILL_SKIPPED.items():
            assert f'skipped {folder / name}: {reason}' in printed.stderr
        for name, note in DRILL_NOTES.items():
            with open(out / (name + '.json')) as f:
                record = json.load(f)
            assert record['task'] == task
            assert len(record['input_notes']) == 1
            assert record['input_notes'][0].startswith(note), record
    # each prediction is the one of the decoded image saved losslessly
    inferencer = MMLocatInferencer(seg_model['cfg'], seg_model['ckpt'])
    out = tmp_path / 'segmentation'
    for name in DRILL_NOTES:
        png = str(tmp_path / (name + '.decoded.png'))
        cv2.imwrite(png, mmcv.imread(str(folder / name)))
        labels = cv2.imread(
            str(out / (name + '.labels.png')), cv2.IMREAD_UNCHANGED)
        np.testing.assert_array_equal(labels, _labels_alone(inferencer, png))


def _host_visualizer(task):
    """The host's own visualizer class of ``task``, built directly (not
    from a config) with a fresh instance name."""
    import time
    name = f'reference-{task}-{time.perf_counter_ns()}'
    if task == 'classification':
        from mmpretrain.visualization import UniversalVisualizer
        return UniversalVisualizer(name=name)
    if task == 'detection':
        from mmdet.visualization import DetLocalVisualizer
        return DetLocalVisualizer(name=name)
    from mmseg.visualization import SegLocalVisualizer
    return SegLocalVisualizer(name=name)


@pytest.mark.timeout(300)
@pytest.mark.parametrize('fixture,task,visualizer', [
    ('cls_model', 'classification', 'UniversalVisualizer'),
    ('seg_model', 'segmentation', 'SegLegendVisualizer'),
    ('coco_fvit', 'detection', 'DetLocalVisualizer'),
    ('zero_shot', 'zero-shot segmentation', 'SegLegendVisualizer'),
])
def test_pictures_are_the_host_visualizers(fixture, task, visualizer, request,
                                           tmp_path):
    """The PNG is what the host's visualizer draws for the same data
    sample (pixel-equal; segmentation: the panel left of the legend), with
    the visualizer the config names, as tools/test.py --show-dir builds
    it."""
    from mmlocat.apis import MMLocatInferencer, collect_images, read_image_rgb
    from mmlocat.apis.inferencer import score_labels
    model = request.getfixturevalue(fixture)
    # detection: every box drawn, so the picture cannot be the bare image
    inferencer = MMLocatInferencer(
        model['cfg'], model['ckpt'], score_thr=0.0, topk=3)
    assert inferencer.task == task
    assert type(inferencer.handler.host.visualizer).__name__ == visualizer
    image = collect_images(model['val_dir'])[0]
    record = inferencer(image, out_dir=str(tmp_path / 'out'))['predictions'][0]
    png = cv2.imread(record['png'])[..., ::-1]
    img = read_image_rgb(image)
    sample = record['data_sample']
    names = inferencer.classes
    ref_file = str(tmp_path / 'reference.png')
    host = _host_visualizer(task)
    if task == 'classification':
        assert names == model['classes']
        top = torch.argsort(-sample.pred_score, stable=True)[:3]
        # the scores with 3 significant digits, after the names (issue 36)
        shown = score_labels(sample.pred_score.tolist(), names)
        assert shown[int(top[0])].startswith(names[int(top[0])] + ', ')
        host.visualize_cls(
            img,
            sample.clone().set_pred_label(top),
            classes=shown,
            draw_gt=False,
            draw_score=False,
            out_file=ref_file)
    elif task == 'detection':
        assert len(sample.pred_instances) > 0
        host.dataset_meta = dict(
            classes=names,
            palette=[tuple(c) for c in inferencer.handler.palette(names)])
        host.add_datasample(
            'x',
            img,
            sample,
            draw_gt=False,
            pred_score_thr=0.0,
            out_file=ref_file)
    else:
        host.set_dataset_meta(names, inferencer.handler.palette(names))
        host.alpha = 0.5  # the inferencer's default
        # the host's masks; the region labels are mmlocat's (issue 36)
        host.add_datasample(
            'x',
            img,
            sample,
            draw_gt=False,
            out_file=ref_file,
            with_labels=False)
    ref = cv2.imread(ref_file)[..., ::-1]
    assert not np.array_equal(ref, img)  # the host drew something
    if visualizer == 'SegLegendVisualizer':
        # the host's panel, then the legend strip
        assert png.shape[0] == ref.shape[0] and png.shape[1] > ref.shape[1]
        keep = np.ones(ref.shape[:2], bool)
        for *_, (x0, y0, x1, y1) in region_label_boxes(
                sample.pred_sem_seg.data[0].cpu().numpy(), names):
            keep[y0:y1 + 1, x0:x1 + 1] = False
        np.testing.assert_array_equal(png[:, :ref.shape[1]][keep], ref[keep])
    else:
        np.testing.assert_array_equal(png, ref)


def test_picture_without_class_names_labels_by_number(seg_model, tmp_path):
    """Names of another label space are not drawn, nor mmseg's Cityscapes
    guess: the regions and the legend say 'class N'."""
    from mmlocat.apis import MMLocatInferencer, collect_images
    inferencer = MMLocatInferencer(
        seg_model['cfg'],
        seg_model['ckpt'],
        cfg_options={
            'test_dataloader.dataset.metainfo': dict(classes=('a', 'b'))
        })
    assert inferencer.classes is None
    record = inferencer(
        collect_images(seg_model['val_dir'])[0],
        out_dir=str(tmp_path))['predictions'][0]
    assert cv2.imread(record['png']) is not None
    meta = inferencer.handler.host.visualizer.dataset_meta
    assert meta['classes'] == [f'class {i}' for i in range(150)]
    assert meta['palette'] == class_palette(150)


# -- issue 35: per-image faults, --out, overrides, class-name files -------


@pytest.mark.timeout(300)
def test_per_image_faults_are_skipped_counted_and_named(seg_model, tmp_path):
    """A 1x1 image crashed the whole run inside mmseg's visualizer, a 1x64
    image and a dangling symbolic link ended it: each is now skipped with
    its reason, the other images are predicted, the exit status is 1."""
    cfg, ckpt = seg_model['cfg'], seg_model['ckpt']
    folder = tmp_path / 'photos'
    folder.mkdir()
    val = sorted(os.listdir(seg_model['val_dir']))
    img = cv2.imread(osp.join(seg_model['val_dir'], val[0]))
    cv2.imwrite(str(folder / 'a_tiny.png'), img[:1, :1])
    cv2.imwrite(str(folder / 'b_strip.png'), img[:1, :64])
    cv2.imwrite(str(folder / 'c_good.jpg'), img)
    os.symlink(tmp_path / 'moved_away.jpg', folder / 'd_link.jpg')
    out = tmp_path / 'out'
    printed = run_tool(INFER, folder, cfg, ckpt, '--out', out).exits(1)
    assert sorted(_records(str(out))) == ['c_good.jpg']
    assert ('infer.py: 1 image(s) written to '
            f'{out}, 3 skipped') in printed.stdout, printed.stdout
    err = printed.stderr
    assert f'infer.py: skipped {folder / "a_tiny.png"}: failed at 1x1: ' \
        in err, err[-3000:]
    assert f'infer.py: skipped {folder / "b_strip.png"}: failed at 64x1: ' \
        in err, err[-3000:]
    assert (f'infer.py: skipped {folder / "d_link.jpg"}: a symbolic link '
            f'to {tmp_path / "moved_away.jpg"}, which does not exist') in err


def test_out_naming_an_existing_file_is_refused_before_the_model(
        cls_model, tmp_path):
    """--out naming a file failed only when the first picture was written
    (after the model was built); an input image, the checkpoint or the
    config given as --out by mistake is named. The checkpoint here is not
    even a checkpoint: nothing is read before --out is checked."""
    cfg = cls_model['cfg']
    image = sorted(
        osp.join(root, f) for root, _, files in os.walk(cls_model['val_dir'])
        for f in files)[0]
    ckpt = tmp_path / 'junk.pth'
    ckpt.write_bytes(b'junk')
    notes = tmp_path / 'notes.txt'
    notes.write_text('mine\n')
    for out, what in ((notes, 'an existing file'), (cfg, f'the config {cfg}'),
                      (ckpt, f'the checkpoint {ckpt}'),
                      (image, f'the input image {image}')):
        _assert_cli_error(
            ['infer.py', image, cfg,
             str(ckpt), '--out',
             str(out)],
            f'--out {out} is {what}, not a folder: --out names the '
            'folder the pictures and JSON go to; choose another (nothing '
            'was written)')
    assert notes.read_text() == 'mine\n' and ckpt.read_bytes() == b'junk'


def test_cfg_options_typo_is_refused(cls_model, tmp_path):
    cfg, ckpt = cls_model['cfg'], cls_model['ckpt']
    out = tmp_path / 'out'
    _assert_cli_error(
        [
            'infer.py', cls_model['val_dir'], cfg, ckpt, '--out',
            str(out), '--cfg-options', 'test_dataloder.batch_size=1'
        ], f"--cfg-options test_dataloder.batch_size: {cfg} has no "
        "top-level key 'test_dataloder' (the override would be ignored); "
        "did you mean 'test_dataloader'? to add the key on purpose, pass "
        '--cfg-new-keys test_dataloder')
    assert not out.exists()
    # the escape: a new key on purpose runs
    run_tool(INFER, cls_model['val_dir'], cfg, ckpt, '--out', out,
             '--cfg-options', 'my_note=1', '--cfg-new-keys',
             'my_note').exits(0)


def test_classes_file_latin1_and_duplicates_are_named(coco_fvit, tmp_path):
    """A Latin-1 --classes file ended in a bare UnicodeDecodeError; a name
    listed twice was reported without its lines."""
    latin = tmp_path / 'latin.txt'
    latin.write_bytes('cat\ncaf\u00e9 table\n'.encode('latin-1'))
    twice = tmp_path / 'twice.txt'
    twice.write_text('cat\ndog\ncat\n')
    for path, message in (
        (latin, f"{latin}:2: bytes b'\\xe9' are not valid utf-8"),
        (twice, f"{twice}:3: class name 'cat' is listed twice (lines 1 and "
         '3); a class is one line: remove one of them'),
    ):
        _assert_cli_error([
            'infer.py', coco_fvit['val_dir'], coco_fvit['cfg'],
            coco_fvit['ckpt'], '--classes',
            str(path), '--vocab-cache',
            str(tmp_path)
        ], message)


# -- issue 36: no misleading log lines ------------------------------------


def _logged(run):
    """The messages mmengine's current logger writes while ``run()`` runs
    (it does not propagate to pytest's ``caplog``)."""
    import logging

    from mmengine.logging import MMLogger
    logger = MMLogger.get_current_instance()
    messages = []
    handler = logging.Handler()
    handler.emit = lambda r: messages.append(r.getMessage())
    logger.addHandler(handler)
    try:
        run()
    finally:
        logger.removeHandler(handler)
    return messages


@pytest.mark.timeout(300)
@pytest.mark.parametrize('fixture', ['seg_model', 'zero_shot'])
def test_segmentation_infer_logs_no_foreign_meta_or_scope(
        fixture, request, tmp_path):
    """Neither mmseg's Cityscapes guess for a checkpoint loaded later
    ("dataset_meta names 19 classes (road, ...)") nor mmengine's "Failed
    to search registry with scope" reaches the log of a segmentation
    inference: the dataset meta and the registry scope are resolved."""
    from mmlocat.apis import MMLocatInferencer, collect_images
    model = request.getfixturevalue(fixture)

    def run():
        inferencer = MMLocatInferencer(model['cfg'], model['ckpt'])
        inferencer(
            collect_images(model['val_dir'])[0], out_dir=str(tmp_path / 'out'))

    messages = _logged(run)
    bad = [
        m for m in messages if 'dataset_meta names' in m
        or 'Failed to search registry' in m or 'road' in m
    ]
    assert not bad, bad
