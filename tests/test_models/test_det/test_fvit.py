"""FViT: frozen backbone, label mapping, losses, fused predictions, the
value-path tap and the build-time checks of the text embeddings."""
import types

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers.fvit import (EMBED, build_detector, det_batch, tiny_fvit_cfg,
                          write_embeddings)
from helpers.tiny_archs import tiny_vit

from mmlocat.engine.hooks import OVLabelSpaceHook
from mmlocat.text import save_text_embeddings
from mmlocat.utils.checkpoint_io import save_checkpoint

NAMES = ['cat', 'dog', 'car']


@pytest.fixture
def emb(tmp_path):
    return write_embeddings(tmp_path / 'emb.npy', NAMES)


def test_frozen_backbone_and_loss(emb):
    model = build_detector(
        tiny_fvit_cfg(
            emb,
            NAMES,
            base_class_names=['cat', 'car'],
            train_class_names=['cat', 'car'],
            with_mask=True))
    model.train()
    assert not model.backbone.training
    assert model.neck.training and model.roi_head.training
    # the non-finite policy follows the detector, passed to the (always
    # eval) backbone: no check (no host sync) while training, the check
    # while testing
    calls = []
    dense = model.backbone.forward_dense
    model.backbone.forward_dense = lambda x, **kw: calls.append(kw) or dense(
        x, **kw)
    x = torch.rand(1, 3, 64, 64)
    model.run_backbone(x)
    model.eval()
    model.run_backbone(x)
    model.train()
    assert [kw['check_finite'] for kw in calls] == [False, True]
    del model.backbone.forward_dense
    assert not any(p.requires_grad for p in model.backbone.parameters())
    before = {k: v.clone() for k, v in model.backbone.state_dict().items()}
    data = det_batch(model, labels=(1, 0))  # 'car', 'cat' in the base space
    losses = model.loss(data['inputs'], data['data_samples'])
    # Train labels (base space) were mapped to the head's classes.
    assert [s.gt_instances.labels.item()
            for s in data['data_samples']] == [2, 0]
    for key in ('loss_rpn_cls', 'loss_cls', 'loss_bbox', 'loss_mask'):
        assert key in losses
    total, _ = model.parse_losses(losses)
    assert torch.isfinite(total)
    total.backward()
    assert all(p.grad is None for p in model.backbone.parameters())
    assert model.neck[0].rescales[0][0].weight.grad is not None
    assert model.roi_head.bbox_head.temperature.grad is not None
    for key, value in model.backbone.state_dict().items():
        torch.testing.assert_close(value, before[key])


def test_label_outside_train_classes(emb):
    model = build_detector(
        tiny_fvit_cfg(emb, NAMES, train_class_names=['cat', 'car']))
    data = det_batch(model, labels=(2, 0))
    with pytest.raises(ValueError, match='outside the 2 train_class_names'):
        model.loss(data['inputs'], data['data_samples'])


def test_predict_fused_differs_from_plain(emb):
    cfg = tiny_fvit_cfg(emb, NAMES, base_class_names=['cat', 'car'])
    # A softer untrained softmax than T=50, so the fusion shows in the top
    # scores.
    cfg['roi_head']['bbox_head']['temperature'] = 5.0
    model = build_detector(cfg)
    model.eval()
    data = det_batch(model)
    calls = []
    dense = model.backbone.forward_dense
    model.backbone.forward_dense = lambda x, **kw: calls.append(kw) or dense(
        x, **kw)
    with torch.no_grad():
        fused = model.predict(data['inputs'], data['data_samples'])
        scores_fused = fused[0].pred_instances.scores.clone()
        model.vlm_fusion = False
        plain = model.predict(data['inputs'], data['data_samples'])
    # One pass per prediction, each with F-ViT's value-path tap (the dense
    # map of the plain prediction is dropped).
    assert calls == [dict(value_path_tap=True, check_finite=True)] * 2
    res = plain[0].pred_instances
    assert len(res.bboxes) == len(res.scores) == len(res.labels) > 0
    assert res.labels.max() < len(NAMES)
    top_fused = scores_fused.sort(descending=True).values[:5]
    top_plain = res.scores.sort(descending=True).values[:5]
    assert not torch.allclose(top_fused, top_plain, rtol=1e-3, atol=0)


def test_fusion_needs_dense_backbone(emb):
    cfg = tiny_fvit_cfg(emb, NAMES)
    cfg['backbone'] = dict(
        type='mmlocat.LocAtViT',
        arch=tiny_vit(num_layers=4),
        img_size=64,
        out_type='featmap',
        out_indices=(0, 1, 2, 3))
    with pytest.raises(TypeError, match="last_tap='value_path' needs"):
        build_detector(cfg)
    cfg['last_tap'] = 'block'
    with pytest.raises(TypeError, match='vlm_fusion needs a backbone with'):
        build_detector(cfg)
    cfg['vlm_fusion'] = False
    cfg['roi_head']['vlm_roi_extractor'] = None
    model = build_detector(cfg)
    model.train()
    assert not model.backbone.training
    assert model.backbone.frozen  # the backbones' own mechanism
    assert not any(p.requires_grad for p in model.backbone.parameters())


def test_backbone_must_be_a_freezable_vit(emb):
    """FViT freezes through the backbone's ``frozen`` option: a backbone
    without one, or ``frozen=False``, is refused at build."""
    cfg = tiny_fvit_cfg(emb, NAMES)
    cfg['backbone'] = dict(cfg['backbone'], frozen=False)
    with pytest.raises(ValueError, match='backbone.frozen must be True'):
        build_detector(cfg)
    cfg['backbone'] = dict(
        type='mmdet.ResNet', depth=18, out_indices=(0, 1, 2, 3))
    cfg['vlm_fusion'], cfg['last_tap'] = False, 'block'
    with pytest.raises(TypeError, match="'mmdet.ResNet' has none"):
        build_detector(cfg)


def test_unknown_train_class(emb):
    with pytest.raises(ValueError, match='not in the box head'):
        build_detector(
            tiny_fvit_cfg(emb, NAMES, train_class_names=['cat', 'cow']))


def _value_path_by_hand(layer, tokens, channels):
    """CLIPSelf's ``forward_without_attn`` of an mmpretrain-layout block,
    written out from its weights."""
    qkv = layer.attn.qkv
    v = F.linear(
        layer.ln1(tokens), qkv.weight[2 * channels:], qkv.bias[2 * channels:])
    x = tokens + F.linear(v, layer.attn.proj.weight, layer.attn.proj.bias)
    fc1, fc2 = layer.ffn.layers[0][0], layer.ffn.layers[1]
    h = fc1(layer.ln2(x))
    h = h * torch.sigmoid(1.702 * h)  # QuickGELU
    return x + fc2(h)


@pytest.mark.parametrize('training', [False, True])
def test_last_tap_is_the_value_path_without_final_norm(emb, training):
    model = build_detector(tiny_fvit_cfg(emb, NAMES))
    model.train(training)
    backbone = model.backbone
    x = torch.randn(2, 3, 64, 64)
    feats, _ = model.run_backbone(x)
    with torch.no_grad():
        (before_last, ), hw = backbone.forward_intermediates(x, [2])
        ref = _value_path_by_hand(backbone.layers[-1], before_last, 32)
    ref = ref[:, 1:].transpose(1, 2).reshape(2, 32, *hw)
    torch.testing.assert_close(feats[-1], ref, atol=1e-5, rtol=1e-5)
    # The earlier taps are the ordinary blocks.
    with torch.no_grad():
        plain = backbone(x)
    for ours, theirs in zip(feats[:-1], plain[:-1]):
        torch.testing.assert_close(ours, theirs)
    assert not torch.allclose(feats[-1], plain[-1], atol=1e-3)


def test_block_tap_option(emb):
    cfg = tiny_fvit_cfg(emb, NAMES)
    cfg['last_tap'] = 'block'
    model = build_detector(cfg)
    x = torch.randn(1, 3, 64, 64)
    feats, vlm_map = model.run_backbone(x)
    assert vlm_map is None
    with torch.no_grad():
        plain = model.backbone(x)
    for ours, theirs in zip(feats, plain):
        torch.testing.assert_close(ours, theirs)
    with pytest.raises(ValueError, match='last_tap must be one of'):
        build_detector(dict(cfg, last_tap='norm'))


def test_roi_features_read_the_maps_values(emb):
    """mmcv's RoIAlign reads its input as contiguous NCHW memory
    (open-mmlab/mmcv#2203); the backbone's maps are permuted token grids,
    so F-ViT makes them contiguous (``_expand_x``). The RoI and CLIP region
    features must be torchvision's stride-aware RoIAlign of the maps."""
    import torchvision
    model = build_detector(tiny_fvit_cfg(emb, NAMES)).eval()
    x = torch.randn(1, 3, 96, 96, generator=torch.Generator().manual_seed(2))
    feats, vlm_map = model.run_backbone(x, dense=True)
    assert all(f.is_contiguous() for f in feats) and vlm_map.is_contiguous()
    with torch.no_grad():
        levels = model.neck(feats)
    rois = torch.tensor([[0., 3., 5., 60., 41.], [0., 20., 2., 90., 95.]])
    ours = model.roi_head.bbox_roi_extractor.roi_layers[0](levels[0], rois)
    ref = torchvision.ops.roi_align(  # the stride-4 level
        levels[0],
        rois,
        7,
        1 / 4,
        sampling_ratio=0,
        aligned=True)
    torch.testing.assert_close(ours, ref, atol=1e-5, rtol=1e-5)
    vlm = model.roi_head.vlm_roi_extractor([vlm_map], rois)
    ref = torchvision.ops.roi_align(
        vlm_map, rois, 1, 1 / 16, sampling_ratio=0, aligned=True)
    torch.testing.assert_close(vlm, ref, atol=1e-6, rtol=1e-5)


def test_embedding_width_checked_at_build(tmp_path):
    narrow = tmp_path / 'narrow.npy'
    rows = NAMES + ['background']
    save_text_embeddings(
        str(narrow),
        np.random.RandomState(0).randn(len(rows), 8).astype(np.float32), rows)
    cfg = tiny_fvit_cfg(str(narrow), NAMES)
    # The head's ReLU'd FC must be as wide as the embeddings.
    with pytest.raises(
            ValueError,
            match=r'narrow\.npy holds 8-d text '
            r'embeddings but the classification branch outputs 16'):
        build_detector(cfg)
    cfg['roi_head']['bbox_head'].update(cls_embed='linear')
    with pytest.raises(
            ValueError,
            match=r'narrow\.npy holds 8-d text embeddings but the backbone '
            r'CLIPViT projects to 16-d'):
        build_detector(cfg)
    good = tiny_fvit_cfg(write_embeddings(tmp_path / 'ok.npy', NAMES), NAMES)
    good['roi_head']['vlm_roi_extractor']['out_channels'] = 12
    with pytest.raises(
            ValueError,
            match=r'ok\.npy holds 16-d text embeddings but roi_head\.'
            r'vlm_roi_extractor\.out_channels is 12'):
        build_detector(good)


def _clip_checkpoint(tmp_path, record):
    from mmlocat.models import CLIPViT
    torch.manual_seed(0)
    cfg = tiny_fvit_cfg('unused.npy', NAMES)['backbone']
    cfg.pop('type')
    backbone = CLIPViT(**cfg)
    from mmlocat.utils.records import clip_meta
    path = str(tmp_path / 'clip_mmlocat.pth')
    state = {'backbone.' + k: v for k, v in backbone.state_dict().items()}
    # bound to the weights as the converters write it (issue 34)
    save_checkpoint(
        state, path, meta=clip_meta(dict(record, act='quick_gelu'), state))
    return path


@pytest.mark.parametrize('key', ['name', 'sha256'])
def test_text_model_must_match_the_backbone_checkpoint(tmp_path, key):
    image = dict(name='ViT-B-16', weights='b16.bin', sha256='a' * 64)
    ckpt = _clip_checkpoint(tmp_path, image)
    text = dict(image, **{key: 'other'})
    rows = NAMES + ['background']
    emb = save_text_embeddings(
        str(tmp_path / 'emb.npy'),
        np.random.RandomState(0).randn(len(rows), EMBED).astype(np.float32),
        rows,
        text_model=text)
    cfg = tiny_fvit_cfg(emb, NAMES)
    cfg['backbone']['init_cfg'] = dict(
        type='Pretrained', checkpoint=ckpt, prefix='backbone.')
    with pytest.raises(
            ValueError,
            match=rf'emb\.npy come from CLIP {key} .other. but the backbone '
            rf'checkpoint \S*clip_mmlocat\.pth from .{image[key]}.'):
        build_detector(cfg)
    # A record without the proof (a name only) built before issue 34; it
    # is refused now, naming the opt-out
    save_text_embeddings(
        emb, np.load(emb), rows, text_model=dict(name='ViT-B-16'))
    with pytest.raises(
            ValueError,
            match="names the text model 'ViT-B-16' "
            'only.*check_clip=False'):
        build_detector(cfg)
    # The same CLIP builds and loads.
    save_text_embeddings(emb, np.load(emb), rows, text_model=image)
    model = build_detector(cfg)
    assert model.backbone.act == 'quick_gelu'


class _Data:

    def __init__(self, classes):
        self.metainfo = dict(classes=tuple(classes))
        self.ann_file = 'annotations/train_base.json'


def _runner(model, classes):
    return types.SimpleNamespace(
        model=model,
        train_dataloader=types.SimpleNamespace(dataset=_Data(classes)))


def test_label_space_hook(emb):
    hook = OVLabelSpaceHook()
    base = ['cat', 'car']
    model = build_detector(tiny_fvit_cfg(emb, NAMES, base_class_names=base))
    # Base-only data without the label map: an error, not mislabelling.
    with pytest.raises(
            ValueError,
            match=r'the training data annotations/train_base\.json labels '
            r"2 classes \['cat', 'car'\].*expects labels indexing 3 "
            r"classes \['cat', 'dog', 'car'\]"):
        hook.before_train(_runner(model, base))
    hook.before_train(_runner(model, NAMES))  # all classes: fine
    mapped = build_detector(
        tiny_fvit_cfg(
            emb, NAMES, base_class_names=base, train_class_names=base))
    hook.before_train(_runner(mapped, base))
    with pytest.raises(ValueError, match='labels 3 classes'):
        hook.before_train(_runner(mapped, NAMES))


@pytest.mark.parametrize('dtype', ['bfloat16', 'float16'])
@pytest.mark.parametrize('tower', ['clip', 'eva02'])
def test_test_time_autocast(emb, dtype, tower):
    """``test_cfg.autocast``: F-ViT's fp16 testing. The backbone, neck, RPN
    and RoI head layers run in ``dtype``; RoIAlign, decoding, fusion and NMS
    in fp32; the per-proposal results stay close to fp32's."""
    from mmdet.structures import DetDataSample
    from mmengine.structures import InstanceData
    cfg = tiny_fvit_cfg(emb, NAMES, base_class_names=['cat', 'car'])
    if tower == 'eva02':
        cfg['backbone'] = dict(cfg['backbone'], type='mmlocat.EVA02CLIPViT')
    fp32 = build_detector(cfg).eval()
    assert fp32.test_autocast is None
    cfg['test_cfg']['autocast'] = dtype
    amp = build_detector(cfg).eval()
    amp.load_state_dict(fp32.state_dict())
    seen = {}

    def first(value):
        while isinstance(value, (tuple, list)):
            value = value[0]
        return value

    def record(name):

        def hook(module, args, out):
            seen[name] = first(args).dtype, first(out).dtype

        return hook

    amp.neck[1].register_forward_hook(record('fpn'))
    amp.rpn_head.register_forward_hook(record('rpn'))
    amp.roi_head.bbox_roi_extractor.register_forward_hook(record('roi'))
    amp.roi_head.bbox_head.shared_fcs[0].register_forward_hook(record('fc'))
    amp.roi_head.vlm_roi_extractor.register_forward_hook(record('vlm'))
    x = torch.randn(2, 3, 80, 96, generator=torch.Generator().manual_seed(1))
    proposals = torch.tensor([[2., 3., 40., 50.], [10., 20., 90., 70.],
                              [30., 5., 60., 30.], [0., 0., 95., 79.]])

    def samples(with_proposals):
        out = []
        for _ in range(2):
            s = DetDataSample(
                metainfo=dict(
                    img_shape=(80, 96),
                    ori_shape=(80, 96),
                    scale_factor=(1., 1.)))
            if with_proposals:
                s.proposals = InstanceData(bboxes=proposals.clone())
            out.append(s)
        return out

    rcnn_test_cfg = amp.roi_head.test_cfg
    with torch.no_grad():
        # every (proposal, class) score and box, before NMS
        fp32.roi_head.test_cfg = amp.roi_head.test_cfg = None
        ref = fp32.predict(x, samples(True))
        res = amp.predict(x, samples(True))
    low = getattr(torch, dtype)
    assert seen['fpn'][1] == low and seen['fc'][1] == low
    assert 'rpn' not in seen  # proposals given
    assert seen['roi'] == (torch.float32, torch.float32)
    assert seen['vlm'] == (torch.float32, torch.float32)
    # fp16 keeps 11 significant bits, bfloat16 8; the classifier's
    # temperature (50) scales the cosine's rounding into the softmax
    tol = 3e-2 if dtype == 'bfloat16' else 1e-2
    for a, b in zip(ref, res):
        a, b = a.pred_instances, b.pred_instances
        assert b.scores.dtype == torch.float32
        assert not torch.equal(a.scores, b.scores)  # another dtype path
        torch.testing.assert_close(b.scores, a.scores, atol=tol, rtol=tol)
        torch.testing.assert_close(b.bboxes, a.bboxes, atol=0.5, rtol=0)
    # the whole test path (RPN, NMS, shipped thresholds) in autocast
    amp.roi_head.test_cfg = rcnn_test_cfg
    with torch.no_grad():
        out = amp.predict(x, samples(False))
    assert seen['rpn'] == (torch.float32, low)
    assert len(out[0].pred_instances.scores) > 0
    assert out[0].pred_instances.bboxes.dtype == torch.float32
    with pytest.raises(ValueError, match="got 'half'"):
        build_detector(
            dict(cfg, test_cfg=dict(cfg['test_cfg'], autocast='half')))
