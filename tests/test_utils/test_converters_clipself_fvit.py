"""CLIPSelf's released F-ViT checkpoints (mmdet 2.x) -> ``mmlocat.FViT``.

The checkpoints are made at random init by a transcription of F-ViT
(``tests/helpers/clipself_reference.py``: F-ViT's module tree, hence its key
layout, and its test-time forward), converted, loaded strictly into the
model of the shipped ``configs/ovd/fvit_eva02-clip-*`` configs (tiny tower
on both sides, or the real sizes on the meta device) and run: the
converted detector must give F-ViT's detections.
"""
import importlib.util
import json
import os.path as osp
import sys

import numpy as np
import pytest
import torch
from helpers.clipself_reference import (FViTReference, mmcv_checkpoint,
                                        randomise_, rope_tables)
from helpers.fvit import (CHANNELS, EMBED, NORM, TINY, TINY_ARCH, TINY_MASK,
                          build_detector, shipped_config_path)
from helpers.harness import run_tool
from mmdet.registry import MODELS
from mmdet.structures import DetDataSample
from mmengine.config import Config
from mmengine.registry import DefaultScope

from mmlocat.text import load_text_embeddings, save_text_embeddings
from mmlocat.utils.checkpoint_io import (load_state_dict_reported,
                                         read_checkpoint)
from mmlocat.utils.converters import (clipself_fvit_weights,
                                      convert_clipself_fvit)
from mmlocat.utils.converters.clipself_fvit import (CLASS_EMBEDDINGS_KEY,
                                                    DROP_REASONS)
from mmlocat.utils.records import file_sha256

COCO = 'ovd/fvit_eva02-clip-b16_ov-coco.py'
LVIS = 'ovd/fvit_eva02-clip-b16_ov-lvis.py'
TOOL = 'tools/model_converters/clipself_fvit2mmlocat.py'
LVIS_NAMES = [
    'aerosol_can', 'air_conditioner', 'airplane', 'alarm_clock', 'alcohol'
]
# CLIPSelf's EVA02-CLIP-B-16 / -L-14-336 towers.
EVA02_B16 = dict(
    dim=768, depth=12, heads=12, hidden=2048, out_dim=512, patch=16, img=224)
EVA02_L14_336 = dict(
    dim=1024, depth=24, heads=16, hidden=2730, out_dim=768, patch=14, img=336)
# The tiny tower of helpers.fvit, in F-ViT's terms.
REF_ARCH = dict(
    dim=TINY_ARCH['embed_dims'],
    depth=TINY_ARCH['num_layers'],
    heads=TINY_ARCH['num_heads'],
    hidden=TINY_ARCH['feedforward_channels'],
    out_dim=EMBED,
    patch=16,
    img=64)


def shipped(config):
    return Config.fromfile(shipped_config_path(config))


def tiny_model_cfg(config, emb_file, **changes):
    """The shipped config's model with the tiny sizes of
    ``helpers.fvit`` (BN for SyncBN, no pre-trained tower)."""
    cfg = shipped(config)
    overrides = dict(TINY)
    if 'mask_head' in cfg.model.roi_head:
        overrides.update(TINY_MASK)
    if 'norm_cfg' in cfg.model.rpn_head:
        overrides['rpn_head.norm_cfg'] = NORM
    overrides['roi_head.bbox_head.text_embeddings'] = emb_file
    overrides.update(changes)
    cfg.merge_from_dict({f'model.{k}': v for k, v in overrides.items()})
    return cfg.model.to_dict()


def write_embeddings(path, names, dims=EMBED, seed=0):
    rows = np.random.RandomState(seed).randn(len(names) + 1, dims)
    save_text_embeddings(
        str(path), rows.astype(np.float32),
        list(names) + ['background'])
    return str(path)


def reference(emb_file, names, base, model_cfg, seed=3, **kwargs):
    """F-ViT with random weights, as after training on 80 px crops (the
    RoPE tables of that grid cached, as in the released checkpoints)."""
    emb, bg, _ = load_text_embeddings(emb_file, names)
    ref = FViTReference(
        REF_ARCH, (0, 1, 2, 3),
        CHANNELS,
        torch.from_numpy(np.concatenate([emb, bg[None]])),
        [n in base for n in names],
        rpn_test_cfg=model_cfg['test_cfg']['rpn'],
        rcnn_test_cfg=model_cfg['test_cfg']['rcnn'],
        **kwargs)
    randomise_(ref, seed)
    with torch.no_grad():
        ref.backbone(torch.zeros(1, 3, 80, 80))
    return ref


def predict(model, img):
    h, w = img.shape[-2:]
    sample = DetDataSample(
        metainfo=dict(
            img_shape=(h, w), ori_shape=(h, w), scale_factor=(1., 1.)))
    with torch.no_grad():
        return model.predict(img, [sample])[0].pred_instances


def assert_same_detections(ref, model, size=96, seed=7):
    """F-ViT's detections on an input other than the pre-training size
    (resampled position embedding, recomputed RoPE)."""
    img = torch.randn(
        1, 3, size, size, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        boxes, scores, labels = ref.simple_test(img)
    ours = predict(model, img)
    assert len(labels) > 5 and scores.max() > 2 * scores.min()
    assert torch.equal(ours.labels, labels)
    torch.testing.assert_close(ours.scores, scores, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(ours.bboxes, boxes, atol=1e-3, rtol=0)
    return ours


@pytest.fixture(scope='module')
def coco(tmp_path_factory):
    """OV-COCO: the shipped 65 / 48 classes, a released-layout checkpoint
    file of the reference and its conversion."""
    tmp = tmp_path_factory.mktemp('coco')
    cfg = shipped(COCO)
    names, base = list(cfg.all_classes), list(cfg.base_classes)
    emb = write_embeddings(tmp / 'emb.npy', names)
    model_cfg = tiny_model_cfg(COCO, emb)
    ref = reference(emb, names, base, model_cfg)
    src = str(tmp / 'fvit_eva_vitb16_ovcoco_clipself_proposals.pth')
    torch.save(mmcv_checkpoint(ref, names), src)
    return dict(
        tmp=tmp,
        names=names,
        emb=emb,
        ref=ref,
        src=src,
        model_cfg=model_cfg,
        weights=clipself_fvit_weights(read_checkpoint(src), src))


def test_coco_checkpoint_loads_strictly_and_detects_as_fvit(coco):
    weights, ref = coco['weights'], coco['ref']
    model = build_detector(coco['model_cfg']).eval()
    report = load_state_dict_reported(model, weights.state_dict)
    assert not report.missing and not report.unexpected
    sd, src = model.state_dict(), ref.state_dict()
    # the tensors land where F-ViT uses them
    for ours, theirs in [
        ('roi_head.bbox_head.temperature',
         'roi_head.bbox_head.detect_temperature'),
        ('neck.0.rescales.0.1.running_var',
         'backbone.interpolate1.1.running_var'),
        ('neck.0.rescales.0.3.weight', 'backbone.interpolate1.3.weight'),
        ('neck.0.rescales.1.0.bias', 'backbone.interpolate2.0.bias'),
        ('neck.1.fpn_convs.2.bn.weight', 'neck.fpn_convs.2.bn.weight'),
        ('rpn_head.rpn_conv.1.conv.weight', 'rpn_head.rpn_conv.1.conv.weight'),
        ('roi_head.bbox_head.cls_fcs.0.weight',
         'roi_head.bbox_head.cls_fcs.0.weight'),
        ('backbone.layers.3.attn.v_proj.bias',
         'backbone.visual.blocks.3.attn.v_bias'),
        ('backbone.ln1.weight', 'backbone.visual.norm.weight'),
        ('backbone.head.weight', 'backbone.visual.head.weight'),
    ]:
        assert torch.equal(sd[ours], src[theirs].reshape(sd[ours].shape))
    assert torch.equal(
        sd['backbone.layers.2.ffn.w12.weight'],
        torch.cat((src['backbone.visual.blocks.2.mlp.w1.weight'],
                   src['backbone.visual.blocks.2.mlp.w2.weight'])))
    # every source entry is converted or dropped with its reason: the
    # converted count is that of the kept keys less one per SwiGLU w1 / w2
    # pair stacked into w12 (weight and bias of 4 blocks)
    dropped = weights.dropped
    kept = [k for k in src if k not in dropped]
    assert len(weights.state_dict) == len(kept) - 2 * 4
    rope = sorted(k for k, r in dropped.items() if r == 'rope')
    # top-level + 4 blocks x (cos, sin, flag, cached cos / sin of 80 px)
    assert len(rope) == 5 * 5
    assert 'backbone.visual.blocks.3.attn.rope.freqs_cos_25' in rope
    assert {
        k: r
        for k, r in dropped.items() if r != 'rope'
    } == {
        'roi_head.bbox_head.fc_cls.weight': 'fc_cls',
        'roi_head.bbox_head.fc_cls.bias': 'fc_cls',
        CLASS_EMBEDDINGS_KEY: 'embeddings',
        'meta': 'meta',
        'optimizer': 'optimizer'
    }
    assert set(dropped.values()) <= set(DROP_REASONS)
    assert weights.meta['epoch'] == 3 and weights.meta[
        'mmdet_version'] == '2.28.1'
    assert weights.meta['classes'] == coco['names']
    torch.testing.assert_close(weights.class_embeddings,
                               src[CLASS_EMBEDDINGS_KEY].t())
    assert_same_detections(ref, model)


def test_lvis_checkpoint_with_mask_norm_rpn_and_learned_background(tmp_path):
    """OV-LVIS: CLIPSelf's CustomRPNHead (BN after the shared convs), the
    class-agnostic mask head, F-ViT's ``learn_bg`` (our
    ``background='learned'``), LVIS fusion settings."""
    emb = write_embeddings(tmp_path / 'lvis.npy', LVIS_NAMES, seed=1)
    base = LVIS_NAMES[:3]
    base_file = tmp_path / 'lvis.base.json'
    base_file.write_text(json.dumps(base))
    model_cfg = tiny_model_cfg(
        LVIS, emb, **{
            'roi_head.bbox_head.base_class_names': str(base_file),
            'roi_head.bbox_head.background': 'learned'
        })
    head = model_cfg['roi_head']['bbox_head']
    ref = reference(
        emb,
        LVIS_NAMES,
        base,
        model_cfg,
        seed=4,
        rpn_norm=True,
        with_mask=True,
        learn_bg=True,
        vlm_temperature=head['vlm_temperature'],
        alpha=head['alpha'],
        beta=head['beta'])
    with torch.no_grad():  # a trained background differs from the text row
        ref.roi_head.bbox_head.bg_embedding.add_(0.3)
    weights = convert_clipself_fvit(ref.state_dict())
    model = build_detector(model_cfg).eval()
    report = load_state_dict_reported(model, weights.state_dict)
    assert not report.missing and not report.unexpected
    sd, src = model.state_dict(), ref.state_dict()
    assert torch.equal(sd['roi_head.bbox_head.bg_embedding'],
                       src['roi_head.bbox_head.bg_embedding'][:, 0])
    for key in ('rpn_head.rpn_conv.1.bn.running_mean',
                'roi_head.mask_head.convs.3.bn.weight',
                'roi_head.mask_head.upsample.weight',
                'roi_head.mask_head.conv_logits.bias'):
        assert torch.equal(sd[key], src[key])
    ours = assert_same_detections(ref, model, seed=8)
    assert ours.masks.shape[0] == len(ours.labels)


def test_real_sizes_load_strictly(tmp_path):
    """The released B/16 and L/14-336 layouts at their real sizes (on the
    meta device: keys and shapes) into the shipped configs' models."""
    for config, arch, taps in [
        (COCO, EVA02_B16, (3, 5, 7, 11)),
        (LVIS, EVA02_B16, (3, 5, 7, 11)),
        ('ovd/fvit_eva02-clip-l14-336_ov-coco.py', EVA02_L14_336, (6, 10, 14,
                                                                   23)),
    ]:
        cfg = shipped(config)
        head = cfg.model.roi_head.bbox_head
        lvis = 'mask_head' in cfg.model.roi_head
        if lvis:  # 1203 classes, named by the sidecar
            names = [f'c{i}' for i in range(1203)]
            head.base_class_names = names[:866]
        else:
            names = list(head.class_names)
        head.text_embeddings = write_embeddings(tmp_path / 'emb.npy', names,
                                                arch['out_dim'])
        cfg.model.backbone.init_cfg = None
        with torch.device('meta'), DefaultScope.overwrite_default_scope(
                'mmdet'):  # no init_weights: nothing to initialise
            model = MODELS.build(cfg.model)
            ref = FViTReference(
                arch,
                taps,
                256,
                torch.ones(len(names) + 1, arch['out_dim']),
                [True] * len(names),
                rpn_test_cfg=cfg.model.test_cfg.rpn,
                rcnn_test_cfg=cfg.model.test_cfg.rcnn,
                rpn_norm=lvis,
                with_mask=lvis)
        # real RoPE tables (the converter checks them), the rest shapes only
        cos, sin = rope_tables(arch['img'] // arch['patch'], 64, 16)
        sd = {
            k:
            cos if k.endswith('freqs_cos') else
            sin if k.endswith('freqs_sin') else v
            for k, v in ref.state_dict().items()
        }
        assert sd['roi_head.bbox_head.fc_cls.weight'].shape == (
            len(names) + 1, arch['out_dim'])
        weights = convert_clipself_fvit(sd)
        report = load_state_dict_reported(model, weights.state_dict)
        assert not report.missing and not report.unexpected, config


def test_pyramid_without_norm(coco):
    """F-ViT's backbone built with ``norm_cfg=None`` keeps an Identity at
    index 1 of its x4 stack; PatchScoreNeck(norm_cfg=None) leaves it out,
    so the second deconvolution moves from index 3 to 2."""
    src = {
        k: v
        for k, v in coco['ref'].state_dict().items()
        if not k.startswith('backbone.interpolate1.1.')
    }
    weights = convert_clipself_fvit(src)
    assert torch.equal(weights.state_dict['neck.0.rescales.0.2.weight'],
                       src['backbone.interpolate1.3.weight'])
    cfg = dict(coco['model_cfg'])
    cfg['neck'] = [dict(cfg['neck'][0], norm_cfg=None), cfg['neck'][1]]
    report = load_state_dict_reported(build_detector(cfg), weights.state_dict)
    assert not report.missing and not report.unexpected


def test_bad_inputs(coco):
    src = coco['ref'].state_dict()
    with pytest.raises(ValueError, match='already mmlocat.FViT'):
        convert_clipself_fvit(coco['weights'].state_dict)
    eva_clip = {
        k[len('backbone.'):]: v
        for k, v in src.items() if k.startswith('backbone.visual.')
    }
    with pytest.raises(ValueError, match='not a CLIPSelf F-ViT state dict'):
        convert_clipself_fvit(eva_clip)
    extra = dict(src, **{'roi_head.bbox_head.fc_extra.weight': torch.ones(1)})
    with pytest.raises(ValueError, match='fc_extra.weight'):
        convert_clipself_fvit(extra)
    fixed = {
        k: v
        for k, v in src.items() if not k.endswith('detect_temperature')
    }
    with pytest.raises(ValueError, match='fixed temperature'):
        convert_clipself_fvit(fixed)
    with pytest.raises(ValueError, match='pt_seq_len'):
        convert_clipself_fvit(src, rope_pt_seq_len=8)
    with pytest.raises(ValueError, match=r"x.pth: entries \['ema'\]"):
        clipself_fvit_weights(dict(state_dict=src, ema={}), 'x.pth')
    assert convert_clipself_fvit({
        'module.' + k: v
        for k, v in src.items()
    }).state_dict.keys() == coco['weights'].state_dict.keys()


@pytest.mark.e2e
def test_converter_tool(coco, subprocess_env, repo_root):
    tmp, src = coco['tmp'], coco['src']
    dst = str(tmp / 'converted.pth')
    export = str(tmp / 'exported.npy')
    classes = tmp / 'mscoco_65_classes.json'
    classes.write_text(json.dumps(coco['names']))
    proc = run_tool(TOOL, src, dst, '--text-embeddings', coco['emb'],
                    '--export-embeddings', export, '--class-names',
                    str(classes))
    assert proc.returncode == 0, proc.stderr
    assert 'dropped 2 (fc_cls)' in proc.stdout
    assert 'dropped 25 (rope)' in proc.stdout
    saved = torch.load(dst, weights_only=True)
    meta = saved['meta']
    assert meta['converter'] == 'clipself_fvit2mmlocat'
    assert meta['source'] == osp.basename(src)
    record = meta['clipself_fvit']
    assert record['dropped'] == dict(
        rope=25, fc_cls=2, embeddings=1, meta=1, optimizer=1)
    assert record['classes'] == coco['names']
    assert record['class_embeddings']['shape'] == [66, EMBED]
    # the file written (else the file checked) is the checkpoint's
    # vocabulary, as training records it
    assert meta['class_files'] == {
        'roi_head.bbox_head.text_embeddings':
        dict(
            file=export,
            sha256=file_sha256(export),
            names=coco['names'] + ['background'])
    }
    model = build_detector(coco['model_cfg']).eval()
    report = load_state_dict_reported(model, saved['state_dict'])
    assert not report.missing and not report.unexpected
    # the exported rows are the checkpoint's vocabulary, named by the file
    emb, bg, names = load_text_embeddings(export, coco['names'])
    stored = coco['ref'].state_dict()[CLASS_EMBEDDINGS_KEY].t()
    torch.testing.assert_close(torch.from_numpy(emb), stored[:-1])
    torch.testing.assert_close(torch.from_numpy(bg), stored[-1])
    # a weight file of another family: one line, exit 2, nothing written
    eva = tmp / 'EVA02_CLIP_B_psz16_s8B.pt'
    torch.save(
        {
            k[len('backbone.'):]: v
            for k, v in coco['ref'].state_dict().items()
            if k.startswith('backbone.visual.')
        }, str(eva))
    proc = run_tool(TOOL, str(eva), str(tmp / 'x.pth'))
    assert proc.returncode == 2
    assert proc.stderr.startswith('clipself_fvit2mmlocat: error: ')
    assert 'EVA02_CLIP_B_psz16_s8B.pt: not a CLIPSelf F-ViT' in proc.stderr
    assert not osp.exists(tmp / 'x.pth')


def test_converter_tool_refuses_another_vocabulary(coco, repo_root,
                                                   monkeypatch):
    tmp, src = coco['tmp'], coco['src']
    path = osp.join(repo_root, TOOL)
    spec = importlib.util.spec_from_file_location('clipself_fvit_tool', path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)

    def run(*args):
        monkeypatch.setattr(sys, 'argv',
                            ['tool', src, str(tmp / 'x.pth')] + list(args))
        tool.main()

    # same names and order, other values: refused, naming both files
    other = write_embeddings(tmp / 'other.npy', coco['names'], seed=9)
    with pytest.raises(
            ValueError,
            match=r'other\.npy is not the vocabulary of .*'
            r'fvit_eva_vitb16_ovcoco_clipself_proposals\.pth'):
        run('--text-embeddings', other)
    fewer = write_embeddings(tmp / 'fewer.npy', coco['names'][:-1])
    with pytest.raises(ValueError, match='fewer.npy holds 65 x 16'):
        run('--text-embeddings', fewer)
    classes = tmp / 'classes64.json'
    classes.write_text(json.dumps(coco['names'][:-1]))
    with pytest.raises(
            ValueError, match='lists 64 classes but the F-ViT checkpoint'):
        run('--export-embeddings', str(tmp / 'e.npy'), '--class-names',
            str(classes))
    assert not osp.exists(tmp / 'x.pth')
