"""FViT: frozen backbone, label mapping, losses and fused predictions."""
import numpy as np
import pytest
import torch
from _fvit_tiny import tiny_fvit_cfg, write_embeddings
from mmdet.structures import DetDataSample
from mmdet.structures.mask import BitmapMasks
from mmengine.config import ConfigDict
from mmengine.structures import InstanceData

NAMES = ['cat', 'dog', 'car']


def _build(cfg):
    from mmdet.registry import MODELS
    from mmdet.utils import register_all_modules
    from mmengine.registry import DefaultScope
    register_all_modules(init_default_scope=False)
    torch.manual_seed(0)
    with DefaultScope.overwrite_default_scope('mmdet'):
        model = MODELS.build(ConfigDict(cfg))
    model.init_weights()
    return model


def _batch(model, labels=(1, 0)):
    samples = []
    for label in labels:
        sample = DetDataSample(
            metainfo=dict(
                img_shape=(64, 64),
                ori_shape=(64, 64),
                scale_factor=(1.0, 1.0)))
        mask = np.zeros((1, 64, 64), np.uint8)
        mask[0, 4:40, 8:44] = 1
        sample.gt_instances = InstanceData(
            bboxes=torch.tensor([[8.0, 4.0, 44.0, 40.0]]),
            labels=torch.tensor([label]),
            masks=BitmapMasks(mask, 64, 64))
        samples.append(sample)
    gen = torch.Generator().manual_seed(0)
    imgs = [
        torch.randint(0, 255, (3, 64, 64), generator=gen, dtype=torch.uint8)
        for _ in labels
    ]
    return model.data_preprocessor(
        dict(inputs=imgs, data_samples=samples), True)


@pytest.fixture
def emb(tmp_path):
    return write_embeddings(tmp_path / 'emb.npy', NAMES)


def test_frozen_backbone_and_loss(emb):
    model = _build(
        tiny_fvit_cfg(
            emb,
            NAMES,
            base_class_names=['cat', 'car'],
            train_class_names=['cat', 'car'],
            with_mask=True))
    model.train()
    assert not model.backbone.training
    assert model.neck.training and model.roi_head.training
    assert not any(p.requires_grad for p in model.backbone.parameters())
    before = {k: v.clone() for k, v in model.backbone.state_dict().items()}
    data = _batch(model, labels=(1, 0))  # 'car', 'cat' in the base space
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
    model = _build(tiny_fvit_cfg(emb, NAMES, train_class_names=['cat', 'car']))
    data = _batch(model, labels=(2, 0))
    with pytest.raises(ValueError, match='outside the 2 train_class_names'):
        model.loss(data['inputs'], data['data_samples'])


def test_predict_fused_differs_from_plain(emb):
    model = _build(tiny_fvit_cfg(emb, NAMES, base_class_names=['cat', 'car']))
    model.eval()
    data = _batch(model)
    calls = []
    dense = model.backbone.forward_dense
    model.backbone.forward_dense = lambda x: calls.append(1) or dense(x)
    with torch.no_grad():
        fused = model.predict(data['inputs'], data['data_samples'])
        scores_fused = fused[0].pred_instances.scores.clone()
        model.vlm_fusion = False
        plain = model.predict(data['inputs'], data['data_samples'])
    assert calls == [1]  # the dense CLIP map was computed once, when fusing
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
        arch=dict(
            embed_dims=32, num_layers=4, num_heads=2, feedforward_channels=64),
        img_size=64,
        out_type='featmap',
        out_indices=(0, 1, 2, 3))
    with pytest.raises(TypeError, match='forward_dense'):
        _build(cfg)
    cfg['vlm_fusion'] = False
    cfg['roi_head']['vlm_roi_extractor'] = None
    model = _build(cfg)
    model.train()
    assert not model.backbone.training
    assert not any(p.requires_grad for p in model.backbone.parameters())


def test_unknown_train_class(emb):
    with pytest.raises(ValueError, match='not in the box head'):
        _build(tiny_fvit_cfg(emb, NAMES, train_class_names=['cat', 'cow']))
