"""mmlocat.ZeroShotSegmentor: metric path, features, inference, errors.

* Oracle: a tiny real CLIPViT whose last-block output is overridden by a
  forward hook with tokens that project exactly onto the ground truth's
  class text embeddings scores 100 mIoU through mmseg's own
  ``PascalVOCDataset`` and ``IoUMetric`` (VOC20, and VOC with background
  through ``bg_thresh``).
* A real open_clip model at random init (tiny custom config): the text
  embeddings come from the dump tool, the image tower is converted with
  ``convert_clip``, and the segmentor's patch logits equal open_clip's own
  projected patch tokens against ``encode_text``.
* Several names per class, SCLIP's text background and ``prob_thd``, and
  the constant background option against the rules spelled out by hand;
  the build-time checks (class-name file, prompt recipe, CLIP).
  ``test_zero_shot_sclip_parity.py`` compares the shipped configs with a
  transcription of SCLIP's evaluator.
"""
import importlib.util
import json
import os.path as osp
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers.tiny_archs import tiny_vit
from mmengine.dataset import pseudo_collate
from mmengine.registry import init_default_scope

import mmlocat  # noqa: F401
from mmlocat.testing import generate
from mmlocat.testing.voc_cityscapes_writers import VOC_CLASSES
from mmlocat.text import query_map, save_text_embeddings

EMBED, OUT = 32, 24
TINY = tiny_vit(embed_dims=EMBED, output_dims=OUT)


def _tower(patch_size=1, img_size=32, **kwargs):
    return dict(
        type='mmlocat.CLIPViT',
        arch=TINY,
        img_size=img_size,
        patch_size=patch_size,
        act='gelu',
        **kwargs)


def _orthonormal(num, dims, seed=0):
    q, _ = torch.linalg.qr(
        torch.randn(dims, dims, generator=torch.Generator().manual_seed(seed)))
    return q[:num]


def _write_embeddings(path, names, rows):
    save_text_embeddings(str(path), np.asarray(rows, np.float32), names)
    return str(path)


def _build(**kwargs):
    from mmseg.registry import MODELS
    init_default_scope('mmseg')
    cfg = dict(
        type='mmlocat.ZeroShotSegmentor',
        data_preprocessor=dict(
            type='SegDataPreProcessor',
            mean=[122.7709, 116.7460, 104.0937],
            std=[68.5005, 66.6322, 70.3232],
            bgr_to_rgb=True),
    )
    cfg.update(kwargs)
    cfg.setdefault('backbone', _tower())
    torch.manual_seed(0)
    model = MODELS.build(cfg)
    model.init_weights()
    return model.eval()


@pytest.fixture(scope='module')
def voc(tmp_path_factory):
    root = tmp_path_factory.mktemp('voc')
    return generate('pascal_voc', str(root), 1, 3, (32, 32), num_active=5)


def _voc_dataset(voc, classes=None):
    from mmseg.registry import DATASETS
    init_default_scope('mmseg')
    cfg = dict(
        type='PascalVOCDataset',
        data_root=voc['data_root'],
        data_prefix=dict(img_path='JPEGImages', seg_map_path=voc['ann_dir']),
        ann_file=voc['val_split'],
        pipeline=[
            dict(type='LoadImageFromFile'),
            dict(type='LoadAnnotations'),
            dict(type='PackSegInputs')
        ])
    if classes is not None:
        cfg['metainfo'] = dict(classes=classes)
    return DATASETS.build(cfg)


def _planting_hook(model, text, state, background=None):
    """Replace the tower's output by tokens whose projection is the text
    embedding of each pixel's ground-truth class (``background`` where the
    label is background, any class where it is ignored)."""
    proj_inv = torch.linalg.pinv(model.backbone.proj.detach())

    def hook(module, args, output):
        rows = []
        for sample in state['samples']:
            gt = sample.gt_sem_seg.data[0].long()
            if background is not None:
                targets = torch.where(gt == 0, -1, gt - 1)
            else:
                targets = gt
            targets = targets.clamp(max=len(text) - 1)
            feats = text[targets.clamp(min=0)]
            if background is not None:
                feats[targets < 0] = background
            rows.append((feats @ proj_inv).permute(2, 0, 1))
        return (torch.stack(rows), )

    return model.backbone.register_forward_hook(hook)


def _evaluate(model, dataset, state):
    from mmengine.evaluator import Evaluator
    from mmseg.evaluation import IoUMetric
    evaluator = Evaluator(IoUMetric(iou_metrics=['mIoU']))
    evaluator.dataset_meta = dataset.metainfo
    batch = pseudo_collate([dataset[i] for i in range(len(dataset))])
    state['samples'] = batch['data_samples']
    outputs = model.test_step(batch)
    evaluator.process(outputs, batch)
    return evaluator.evaluate(len(dataset))['mIoU'], outputs


def test_oracle_voc20_scores_100(voc, tmp_path):
    dataset = _voc_dataset(voc, classes=VOC_CLASSES)
    text = _orthonormal(len(VOC_CLASSES), OUT)
    path = _write_embeddings(tmp_path / 'voc20.npy', VOC_CLASSES, text)
    model = _build(text_embeddings=path, classes=dataset.metainfo['classes'])
    state = {}
    handle = _planting_hook(model, text, state)
    miou, outputs = _evaluate(model, dataset, state)
    assert miou == 100.0
    # The metric path can fail: shuffle the class order of the embeddings
    # (same file layout) and the same oracle is far from 100.
    shuffled = _write_embeddings(tmp_path / 'shuffled.npy', VOC_CLASSES,
                                 text.roll(1, dims=0))
    handle.remove()
    model = _build(text_embeddings=shuffled)
    _planting_hook(model, text, state)
    assert _evaluate(model, dataset, state)[0] < 50
    assert outputs[0].pred_sem_seg.shape == (32, 32)


def test_oracle_with_background_threshold(voc, tmp_path):
    dataset = _voc_dataset(voc)  # 21 classes, background first
    assert dataset.metainfo['classes'][0] == 'background'
    basis = _orthonormal(len(VOC_CLASSES) + 1, OUT)
    text, background = basis[:-1], basis[-1]  # cos 0 with every class
    path = _write_embeddings(tmp_path / 'voc.npy', VOC_CLASSES, text)
    model = _build(
        text_embeddings=path,
        bg_thresh=0.5,
        classes=dataset.metainfo['classes'])
    assert model.num_classes == 21
    state = {}
    _planting_hook(model, text, state, background=background)
    miou, outputs = _evaluate(model, dataset, state)
    assert miou == 100.0
    gt = outputs[0].gt_sem_seg.data
    assert (gt == 0).any()  # the background class was really scored


def _pointwise_hook(model):
    """A tower output that is a fixed function of each input pixel, so that
    sliding windows must reproduce the whole-image logits."""
    mix = torch.randn(3, EMBED, generator=torch.Generator().manual_seed(3))

    def hook(module, args, output):
        return (torch.einsum('bchw,cd->bdhw', args[0], mix), )

    return model.backbone.register_forward_hook(hook)


def test_slide_inference_matches_whole(tmp_path):
    names = ['a', 'b', 'c']
    path = _write_embeddings(tmp_path / 'e.npy', names, _orthonormal(3, OUT))
    whole = _build(text_embeddings=path)
    slide = _build(
        text_embeddings=path,
        test_cfg=dict(mode='slide', crop_size=(16, 16), stride=(10, 10)))
    _pointwise_hook(whole)
    _pointwise_hook(slide)
    x = torch.randn(2, 3, 36, 44, generator=torch.Generator().manual_seed(4))
    metas = [dict(ori_shape=(36, 44), img_shape=(36, 44))] * 2
    ref = whole.inference(x, metas)
    out = slide.inference(x, [dict(m) for m in metas])
    assert out.shape == (2, 3, 36, 44)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=0)
    # Whole-image outputs are the query cosines (unscaled), by hand.
    feats = F.normalize(
        torch.einsum(
            'bchw,cd->bhwd', x,
            torch.randn(3, EMBED, generator=torch.Generator().manual_seed(3)))
        @ whole.backbone.proj.detach(),
        dim=-1)
    by_hand = torch.einsum('bhwd,cd->bchw', feats, whole.text_embeddings)
    torch.testing.assert_close(ref, by_hand, atol=1e-5, rtol=0)


def _write_queries(path, lines, rows, text_model=None, classes=None):
    """An embedding file of query names (several per class)."""
    queries, query_class = query_map(lines)
    save_text_embeddings(
        str(path),
        np.asarray(rows, np.float32),
        queries,
        text_model=text_model,
        query_class=query_class,
        classes=classes or [names[0] for names in lines])
    return str(path)


def _class_probs_by_hand(cosines, query_class, num_classes, scale):
    """SCLIP's rule spelled out: softmax over all queries, then each
    class's largest query probability (a loop, not a scatter)."""
    probs = (scale * cosines).softmax(dim=1)
    return torch.stack([
        probs[:, [q for q, k in enumerate(query_class) if k == c]].amax(1)
        for c in range(num_classes)
    ], 1)


def test_synonyms_merge_after_softmax_at_the_image_size(tmp_path):
    """Several names per class: the cosines are resized to the original
    image first, then scaled, softmaxed over all names and max-merged."""
    lines = [['a', 'a2'], ['b'], ['c', 'c2', 'c3']]
    path = _write_queries(tmp_path / 'q.npy', lines, _orthonormal(6, OUT))
    model = _build(text_embeddings=path, logit_scale=40.)
    assert model.num_classes == 3 and model.out_channels == 6
    assert model.class_names == ['a', 'b', 'c']
    assert model.query_names == ['a', 'a2', 'b', 'c', 'c2', 'c3']
    _pointwise_hook(model)
    x = torch.randn(1, 3, 12, 16, generator=torch.Generator().manual_seed(8))
    from mmseg.structures import SegDataSample
    sample = SegDataSample(
        metainfo=dict(
            ori_shape=(30, 37), img_shape=(12, 16), padding_size=[0] * 4))
    out, = model.predict(x, [sample])
    cosines = F.interpolate(
        model.inference(x, [sample.metainfo]), (30, 37), mode='bilinear')
    want = _class_probs_by_hand(cosines, [0, 0, 1, 2, 2, 2], 3, 40.)[0]
    torch.testing.assert_close(out.seg_logits.data, want)
    assert torch.equal(out.pred_sem_seg.data[0], want.argmax(0))
    assert len(out.pred_sem_seg.data.unique()) > 1
    # merging before the softmax would be another rule
    per_class_first = (40. * cosines[:, [0, 2, 3]]).softmax(1)[0]
    assert not torch.allclose(per_class_first, want, atol=1e-3)


def test_text_background_and_prob_thd(tmp_path):
    """COCO-Object as SCLIP: background is class 0 with its own names;
    pixels whose best class probability is below prob_thd become 0."""
    lines = [['sky', 'wall'], ['cat'], ['dog', 'puppy']]
    classes = ['background', 'cat', 'dog']
    path = _write_queries(
        tmp_path / 'bg.npy', lines, _orthonormal(5, OUT), classes=classes)
    model = _build(
        text_embeddings=path, logit_scale=3., prob_thd=0.45, classes=classes)
    assert model.num_classes == 3 and model.output_classes == classes
    _pointwise_hook(model)
    x = torch.randn(1, 3, 20, 24, generator=torch.Generator().manual_seed(9))
    out, = model.predict(x)
    cosines = model.inference(x, [dict(ori_shape=(20, 24))])
    probs = _class_probs_by_hand(cosines, [0, 0, 1, 2, 2], 3, 3.)[0]
    labels = probs.argmax(0)
    low = probs.amax(0) < 0.45
    assert low.any() and (~low).any() and (labels[low] != 0).any()
    labels[low] = 0
    assert torch.equal(out.pred_sem_seg.data[0], labels)
    # the dataset's background is the file's first class: no bg_thresh
    model.check_classes(classes)
    with pytest.raises(ValueError, match='different order'):
        model.check_classes(['background', 'dog', 'cat'])


def test_constant_background_channel_option(tmp_path):
    """mmlocat's earlier rule: [bg_thresh, class probabilities]."""
    path = _write_embeddings(tmp_path / 'e.npy', ['a', 'b'],
                             _orthonormal(2, OUT))
    model = _build(text_embeddings=path, bg_thresh=0.6, logit_scale=5.)
    assert model.output_classes == ['background', 'a', 'b']
    assert model.num_classes == 3
    _pointwise_hook(model)
    x = torch.randn(1, 3, 10, 10, generator=torch.Generator().manual_seed(2))
    out, = model.predict(x)
    probs = (5. * model.inference(x, [dict(ori_shape=(10, 10))])).softmax(1)
    want = torch.cat([torch.full_like(probs[:, :1], 0.6), probs], 1)[0]
    torch.testing.assert_close(out.seg_logits.data, want)
    assert torch.equal(out.pred_sem_seg.data[0], want.argmax(0))


def test_class_name_file_is_checked(tmp_path):
    names_file = tmp_path / 'names.txt'
    names_file.write_text('a, a2\nb\nc, c2, c3')  # no final newline
    lines = [['a', 'a2'], ['b'], ['c', 'c2', 'c3']]
    path = _write_queries(tmp_path / 'q.npy', lines, _orthonormal(6, OUT))
    model = _build(text_embeddings=path, class_name_file=str(names_file))
    assert model.query_names == ['a', 'a2', 'b', 'c', 'c2', 'c3']
    stale = tmp_path / 'stale.txt'
    stale.write_text('a, a2\nb, b2\nc, c2, c3\n')
    with pytest.raises(
            ValueError,
            match=r"class 1 \('b'\) has \['b'\].*"
            r"\['b', 'b2'\] at line 2 of"):
        _build(text_embeddings=path, class_name_file=str(stale))
    short = tmp_path / 'short.txt'
    short.write_text('a, a2\nb\n')
    with pytest.raises(ValueError, match='2 lines .* but .* 3 classes'):
        _build(text_embeddings=path, class_name_file=str(short))
    # one row per class (no row-to-class map) for a file with synonyms
    plain = _write_embeddings(tmp_path / 'plain.npy', ['a', 'b', 'c'],
                              _orthonormal(3, OUT))
    with pytest.raises(ValueError, match='no row-to-class map'):
        _build(text_embeddings=plain, class_name_file=str(names_file))
    with pytest.raises(FileNotFoundError, match='missing.txt'):
        _build(
            text_embeddings=path,
            class_name_file=str(tmp_path / 'missing.txt'))


def test_prompt_recipe_and_clip_are_checked(tmp_path):
    from mmlocat.utils.checkpoint_io import save_checkpoint
    record = dict(
        name='ViT-B-16',
        sha256='1' * 64,
        templates='fvit',
        prompt_style='fvit')
    path = _write_queries(
        tmp_path / 'q.npy', [['a'], ['b']],
        _orthonormal(2, OUT),
        text_model=record)
    with pytest.raises(
            ValueError,
            match="templates 'fvit' but "
            "ZeroShotSegmentor names 'imagenet80'"):
        _build(text_embeddings=path)
    with pytest.raises(
            ValueError,
            match="prompt_style 'fvit' but "
            "ZeroShotSegmentor names 'plain'"):
        _build(text_embeddings=path, templates='fvit')
    _build(text_embeddings=path, templates=None, prompt_style=None)
    # the tower checkpoint records another CLIP (a record bound to its
    # weights, as the converters write it since issue 34: clip_meta)
    from mmlocat.utils.records import clip_meta
    ckpt = str(tmp_path / 'tower.pth')
    tower = _build(text_embeddings=path, templates=None, prompt_style=None)
    state = {
        'backbone.' + k: v
        for k, v in tower.backbone.state_dict().items()
    }
    save_checkpoint(
        state,
        ckpt,
        meta=clip_meta(dict(name='ViT-L-14', sha256='2' * 64), state))
    backbone = _tower(
        init_cfg=dict(type='Pretrained', checkpoint=ckpt, prefix='backbone.'))
    with pytest.raises(
            ValueError,
            match="CLIP name 'ViT-B-16' but the "
            'backbone checkpoint .*tower.pth'):
        _build(
            text_embeddings=path,
            templates='fvit',
            prompt_style='fvit',
            backbone=backbone)
    _build(
        text_embeddings=path,
        templates='fvit',
        prompt_style='fvit',
        backbone=backbone,
        check_clip=False)
    # mmseg's pretrained= keyword names the same checkpoint
    with pytest.raises(ValueError, match="CLIP name 'ViT-B-16'"):
        _build(
            text_embeddings=path,
            templates='fvit',
            prompt_style='fvit',
            pretrained=ckpt)


def test_features_last_and_value_tap(tmp_path):
    names = ['a', 'b']
    path = _write_embeddings(tmp_path / 'e.npy', names, _orthonormal(2, OUT))
    last = _build(text_embeddings=path, backbone=_tower(patch_size=8))
    value = _build(
        text_embeddings=path,
        backbone=_tower(patch_size=8),
        feature_tap='value')
    value.load_state_dict(last.state_dict())
    x = torch.randn(1, 3, 32, 40, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        scores = last.backbone.forward_with_scores(x)
        ref = F.normalize(
            last.backbone.embed_global(scores['featmap'].permute(0, 2, 3, 1)),
            dim=-1).permute(0, 3, 1, 2)
        torch.testing.assert_close(last.extract_feat(x), ref)
        dense = value.backbone.forward_dense(x)[1]
        torch.testing.assert_close(value.extract_feat(x), dense)
        assert not torch.allclose(dense, ref, atol=1e-3)
        logits = last.encode_decode(x, [])
    assert logits.shape == (1, 2, 32, 40)
    assert last.backbone.frozen and not last.backbone.training
    assert not any(p.requires_grad for p in last.parameters())
    with pytest.raises(NotImplementedError, match='training-free'):
        last.loss(x, [])


def _dump_tool(repo_root):
    path = osp.join(repo_root, 'tools/misc/dump_text_embeddings.py')
    spec = importlib.util.spec_from_file_location('dump_text_emb_zs', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_real_open_clip_model(tmp_path, repo_root, monkeypatch):
    """Random-init open_clip (tiny config): embeddings by the dump tool,
    image tower converted; patch logits = open_clip's own."""
    import open_clip

    from mmlocat.utils.converters import convert_clip
    cfg = dict(
        embed_dim=OUT,
        quick_gelu=True,
        vision_cfg=dict(
            image_size=32, layers=2, width=EMBED, head_width=16, patch_size=8),
        text_cfg=dict(
            context_length=77, vocab_size=49408, width=32, heads=2, layers=1))
    cfg_file = tmp_path / 'tiny-zs-clip.json'
    cfg_file.write_text(json.dumps(cfg))
    open_clip.add_model_config(str(cfg_file))
    torch.manual_seed(0)
    clip = open_clip.create_model('tiny-zs-clip', pretrained=None).eval()
    weights = str(tmp_path / 'tiny.bin')
    torch.save(clip.state_dict(), weights)
    names = tmp_path / 'names.txt'
    names.write_text('cat\ndog\nperson\n')
    out = str(tmp_path / 'emb.npy')
    monkeypatch.setattr(sys, 'argv', [
        'dump', '--names',
        str(names), '--model-config',
        str(cfg_file), '--pretrained', weights, '--templates', 'imagenet80',
        '--prompt-style', 'plain', out
    ])
    _dump_tool(repo_root).main()
    model = _build(
        text_embeddings=out,
        backbone=dict(
            type='mmlocat.CLIPViT',
            arch=dict(TINY, feedforward_channels=4 * EMBED),
            img_size=32,
            patch_size=8,
            act='quick_gelu'))
    model.backbone.load_state_dict(convert_clip(clip.state_dict()))
    x = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(6))
    tokenizer = open_clip.get_tokenizer('tiny-zs-clip')
    from mmlocat.text import IMAGENET_TEMPLATES
    with torch.no_grad():
        text = []
        for name in ('cat', 'dog', 'person'):
            t = F.normalize(
                clip.encode_text(
                    tokenizer([tpl.format(name)
                               for tpl in IMAGENET_TEMPLATES])),
                dim=-1).mean(0)
            text.append(F.normalize(t, dim=0))
        text = torch.stack(text)
        clip.visual.output_tokens = True
        _, tokens = clip.visual(x)
        patches = F.normalize(tokens @ clip.visual.proj, dim=-1)
        ref = 100 * (patches @ text.T).reshape(1, 4, 4, 3).permute(0, 3, 1, 2)
        feats = model.extract_feat(x)
        ours = 100 * torch.einsum('bdhw,cd->bchw', feats,
                                  model.text_embeddings)
    torch.testing.assert_close(ours, ref, atol=1e-4, rtol=0)


def test_bad_inputs(tmp_path):
    names = list(VOC_CLASSES)
    path = _write_embeddings(tmp_path / 'e.npy', names, _orthonormal(20, OUT))
    model = _build(text_embeddings=path)
    swapped = names[:]
    swapped[0], swapped[1] = swapped[1], swapped[0]
    with pytest.raises(ValueError, match='different order.*row 0'):
        model.check_classes(swapped)
    with pytest.raises(ValueError, match='lists 20 classes, the dataset 19'):
        model.check_classes(names[:-1])
    with pytest.raises(ValueError, match='no such class and .*no bg_thresh'):
        model.check_classes(['background'] + names)
    with pytest.raises(ValueError, match='no bg_thresh'):
        _build(text_embeddings=path, classes=['background'] + names)
    with pytest.raises(ValueError, match='sends pixels to class 0'):
        _build(text_embeddings=path, prob_thd=0.1)
    with pytest.raises(ValueError, match='exclude each other'):
        _build(text_embeddings=path, prob_thd=0.1, bg_thresh=0.5)
    with pytest.raises(ValueError, match='prob_thd is a probability'):
        _build(text_embeddings=path, prob_thd=1.)
    with pytest.raises(ValueError, match='training-free: train_cfg'):
        _build(text_embeddings=path, train_cfg=dict(type='IterBasedTrainLoop'))
    text_bg = _write_queries(
        tmp_path / 'tb.npy', [['sky'], ['cat']],
        _orthonormal(2, OUT),
        classes=['background', 'cat'])
    with pytest.raises(
            ValueError, match="has a 'background' class but "
            'bg_thresh is set'):
        _build(text_embeddings=text_bg, bg_thresh=0.5)
    with pytest.raises(ValueError, match='no .background. class'):
        _build(text_embeddings=path, bg_thresh=0.5, classes=names)
    with pytest.raises(ValueError, match='must be the first'):
        _build(
            text_embeddings=path,
            bg_thresh=0.5,
            classes=names + ['background'])
    wrong_dims = _write_embeddings(tmp_path / 'w.npy', ['a', 'b'],
                                   _orthonormal(2, 16))
    with pytest.raises(ValueError, match='16-d embeddings.*24 dimensions'):
        _build(text_embeddings=wrong_dims)
    with_bg = _write_embeddings(tmp_path / 'bg.npy', ['a', 'background'],
                                _orthonormal(2, OUT))
    with pytest.raises(ValueError, match="'background' row last"):
        _build(text_embeddings=with_bg)
    with pytest.raises(ValueError, match='feature_tap'):
        _build(text_embeddings=path, feature_tap='qkv')
    with pytest.raises(ValueError, match='bg_thresh is a probability'):
        _build(text_embeddings=path, bg_thresh=1.5)
    with pytest.raises(FileNotFoundError, match='missing.npy'):
        _build(text_embeddings=str(tmp_path / 'missing.npy'))


@pytest.mark.parametrize('tap', ['last', 'value'])
def test_eva02_tower(tmp_path, tap):
    """EVA02-CLIP towers work the same way (projection = ``head``)."""
    path = _write_embeddings(tmp_path / 'e.npy', ['a', 'b'],
                             _orthonormal(2, OUT))
    model = _build(
        text_embeddings=path,
        feature_tap=tap,
        backbone=dict(
            type='mmlocat.EVA02CLIPViT',
            arch=dict(TINY),
            img_size=32,
            patch_size=8))
    x = torch.randn(1, 3, 32, 48, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        if tap == 'value':
            ref = model.backbone.forward_dense(x)[1]
        else:
            featmap = model.backbone.forward_with_scores(x)['featmap']
            ref = F.normalize(
                model.backbone.head(featmap.permute(0, 2, 3, 1)),
                dim=-1).permute(0, 3, 1, 2)
        torch.testing.assert_close(model.extract_feat(x), ref)
        assert model.predict(x)[0].pred_sem_seg.shape == (32, 48)


@pytest.mark.parametrize(
    'tower, error, match', [
        ('CLIPViT', ValueError, 'no projection'),
        ('EVA02CLIPViT', ValueError, 'no projection to the text space'),
        ('LaStViT', TypeError, 'LaStViT is not a CLIP tower'),
    ],
    ids=['clip', 'eva02', 'last'])
def test_backbone_must_be_a_clip_tower_with_a_projection(
        tmp_path, tower, error, match):
    """Every mmlocat ViT maps its tokens with ``embed_global`` (identity but
    for CLIP), so the segmentor asks for a CLIP tower's dense map, with a
    projection to the text space (CLIP's ``proj``, EVA's ``head``); a plain
    ViT is refused before its embeddings file is read."""
    path = 'never_read.npy' if tower == 'LaStViT' else _write_embeddings(
        tmp_path / 'e.npy', ['a', 'b'], _orthonormal(2, OUT))
    arch = {k: v for k, v in TINY.items() if k != 'output_dims'}
    extra = dict(act='gelu') if tower == 'CLIPViT' else {}
    with pytest.raises(error, match=match):
        _build(
            text_embeddings=path,
            backbone=dict(
                type=f'mmlocat.{tower}',
                arch=arch,
                img_size=32,
                patch_size=8,
                **extra))


def _proven_pair(tmp_path, record=None, meta=None, text_model=None):
    """A tower checkpoint and an embedding file of one CLIP, as the
    converter and the dump tool write them; ``record`` / ``meta`` /
    ``text_model`` replace parts to break the proof."""
    from mmlocat.utils.checkpoint_io import save_checkpoint
    from mmlocat.utils.records import clip_meta
    clip = dict(name='ViT-B-16', sha256='1' * 64, text_sha256='3' * 64)
    text = dict(clip, templates='imagenet80', prompt_style='plain')
    if text_model is not None:
        text = text_model
    path = _write_queries(
        tmp_path / 'q.npy', [['a'], ['b']],
        _orthonormal(2, OUT),
        text_model=text)
    tower = _build(text_embeddings=path, templates=None, prompt_style=None)
    state = {
        'backbone.' + k: v
        for k, v in tower.backbone.state_dict().items()
    }
    if meta is None:
        meta = clip_meta(clip if record is None else record, state)
    ckpt = str(tmp_path / 'tower.pth')
    save_checkpoint(state, ckpt, meta=meta)
    backbone = _tower(
        init_cfg=dict(type='Pretrained', checkpoint=ckpt, prefix='backbone.'))
    return path, backbone, ckpt


def test_a_proven_pairing_builds(tmp_path):
    path, backbone, _ = _proven_pair(tmp_path)
    _build(text_embeddings=path, backbone=backbone)


@pytest.mark.parametrize('case, match', [
    ('no record', r"records no CLIP \(meta\['clip'\]\)"),
    ('name only', "names the CLIP 'ViT-B-16' only"),
    ('no text_model', 'the sidecar records no text model'),
    ('name-only sidecar', "names the text model 'ViT-B-16' only"),
    ('copied record', 'a record copied from another checkpoint'),
    ('old record', 'does not fingerprint the tower'),
])
def test_an_unproven_pairing_is_refused(tmp_path, case, match):
    """Issue 34: each of these built and segmented with another CLIP's
    embeddings (mIoU 0.00, exit 0)."""
    from mmengine.logging import MMLogger

    from mmlocat.utils.records import CLIP_KEY
    clip = dict(name='ViT-B-16', sha256='1' * 64, text_sha256='3' * 64)
    kwargs = {
        'no record': dict(meta={}),
        'name only': dict(record=dict(name='ViT-B-16')),
        'no text_model': dict(text_model=None),
        'name-only sidecar': dict(text_model=dict(name='ViT-B-16')),
        'old record': dict(meta={CLIP_KEY: clip}),
        'copied record':
        dict(meta={CLIP_KEY: dict(clip, image_sha256='4' * 64)}),
    }[case]
    if case == 'no text_model':
        # a plain name-list sidecar, as save_text_embeddings writes one
        # without a record
        path, backbone, _ = _proven_pair(tmp_path)
        _write_queries(path, [['a'], ['b']], _orthonormal(2, OUT))
    else:
        path, backbone, _ = _proven_pair(tmp_path, **kwargs)
    with pytest.raises(ValueError, match=match) as info:
        _build(
            text_embeddings=path,
            backbone=backbone,
            templates=None,
            prompt_style=None)
    assert 'check_clip=False' in str(info.value)
    # the named opt-out builds, and says so in the log
    logger = MMLogger.get_current_instance()
    seen = []
    handler = __import__('logging').Handler()
    handler.emit = lambda r: seen.append(r.getMessage())
    logger.addHandler(handler)
    try:
        _build(
            text_embeddings=path,
            backbone=backbone,
            templates=None,
            prompt_style=None,
            check_clip=False)
    finally:
        logger.removeHandler(handler)
    assert any('check_clip=False' in m and path in m for m in seen), seen


def test_a_sidecar_of_other_rows_is_refused(tmp_path):
    """Issue 34: a sidecar next to another ``.npy`` (the rows were never
    fingerprinted) was read with the other rows."""
    path, backbone, _ = _proven_pair(tmp_path)
    np.save(path, np.asarray(_orthonormal(2, OUT, seed=5), np.float32))
    with pytest.raises(ValueError, match='q.json belongs to other rows than'):
        _build(text_embeddings=path, backbone=backbone)
    # not an opt-out matter: the file pair itself is broken
    with pytest.raises(ValueError, match='belongs to other rows'):
        _build(text_embeddings=path, backbone=backbone, check_clip=False)


@pytest.mark.parametrize('value', ['ViT-B-16', ['ViT-B-16'], 3])
def test_a_clip_record_of_the_wrong_type_is_named(tmp_path, value):
    """Issue 34: ``meta['clip']`` of the wrong type crashed with
    AttributeError."""
    path, backbone, ckpt = _proven_pair(tmp_path, meta=dict(clip=value))
    with pytest.raises(ValueError, match=r"tower.pth: meta\['clip'\] is a "):
        _build(text_embeddings=path, backbone=backbone)


def test_an_npz_named_npy_is_named(tmp_path):
    """Issue 34: an ``.npz`` archive named ``.npy`` crashed with
    AttributeError."""
    path, backbone, _ = _proven_pair(tmp_path)
    with open(path, 'wb') as f:
        np.savez(f, rows=np.zeros((2, OUT), np.float32))
    with pytest.raises(ValueError, match='q.npy is an .npz archive'):
        _build(text_embeddings=path, backbone=backbone)


def test_a_loaded_tower_is_checked_as_loaded(tmp_path):
    """What tools/test.py / a host's load_from loads is checked from the
    loaded dict (its meta and its own weights), not from the config's
    init_cfg file."""
    from mmlocat.utils.checkpoint_io import read_checkpoint
    path, backbone, ckpt = _proven_pair(tmp_path)
    model = _build(text_embeddings=path, backbone=backbone)
    loaded = read_checkpoint(ckpt)
    model.check_tower_checkpoint('given.pth', loaded=loaded)  # proven
    # the same record over other weights: copied
    other = dict(
        loaded, state_dict={
            k: v + 1
            for k, v in loaded['state_dict'].items()
        })
    with pytest.raises(ValueError, match='given.pth.s meta.*a record copied'):
        model.check_tower_checkpoint('given.pth', loaded=other)
    with pytest.raises(ValueError, match=r"given.pth records no CLIP"):
        model.check_tower_checkpoint(
            'given.pth', loaded=dict(state_dict=loaded['state_dict']))
