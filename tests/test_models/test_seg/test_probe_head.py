"""SegProbeHead (the papers' probe) and the frozen backbone of the probe
configs."""
import os.path as osp

import pytest
import torch
from mmcv.cnn import ConvModule
from mmengine.config import Config
from mmengine.registry import DefaultScope
from torch import nn

import mmlocat  # noqa: F401
from mmlocat.models.seg import SegProbeHead

REPO = osp.dirname(
    osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))


def make_head(**kwargs):
    cfg = dict(in_channels=32, num_classes=5)
    cfg.update(kwargs)
    return SegProbeHead(**cfg)


def test_structure_matches_the_papers():
    head = make_head(in_channels=192, num_classes=150)
    assert isinstance(head.proj, ConvModule)
    conv = head.proj.conv
    assert isinstance(conv, nn.Conv2d)
    assert (conv.in_channels, conv.out_channels) == (192, 512)
    assert conv.kernel_size == (1, 1)
    norm = head.proj.gn
    assert isinstance(norm, nn.GroupNorm) and norm.num_groups == 1
    assert norm.num_channels == 512
    assert isinstance(head.proj.activate, nn.GELU)
    assert head.dropout is None
    cls = head.conv_seg
    assert (cls.in_channels, cls.out_channels) == (512, 150)
    assert cls.kernel_size == (1, 1)
    # nothing else carries parameters
    names = {n.split('.')[0] for n, _ in head.named_parameters()}
    assert names == {'proj', 'conv_seg'}


def test_output_shape_and_last_level():
    head = make_head(channels=16, in_index=-1)
    feats = [torch.rand(2, 32, 3, 5), torch.rand(2, 32, 4, 6)]
    out = head(feats)
    assert out.shape == (2, 5, 4, 6)


def test_head_is_per_pixel():
    """1x1 convs and a per-sample GroupNorm: a pixel's logits depend on the
    image only through the GroupNorm statistics, so a constant map gives
    constant logits."""
    head = make_head(channels=16).eval()
    out = head([torch.ones(1, 32, 4, 4) * 0.3])
    assert torch.allclose(out, out[:, :, :1, :1].expand_as(out), atol=1e-6)


def test_wrong_channels_raise():
    head = make_head(channels=16)
    with pytest.raises(RuntimeError):
        head([torch.rand(1, 31, 4, 4)])


@pytest.mark.parametrize('name', [
    'probe_locat-t_ade20k.py', 'probe_vit-t_pascal-context-59.py',
    'probe_locat-t_coco-stuff164k.py'
])
def test_probe_config_backbone_is_frozen(name):
    from mmseg.registry import MODELS
    cfg = Config.fromfile(osp.join(REPO, 'configs', 'locat', name))
    cfg.model.backbone.init_cfg = None  # no checkpoint in tests
    with DefaultScope.overwrite_default_scope('mmseg'):
        model = MODELS.build(cfg.model)
    backbone = model.backbone
    assert backbone.frozen_stages == len(backbone.layers)
    assert not any(p.requires_grad for p in backbone.parameters())
    assert all(p.requires_grad for p in model.decode_head.parameters())
    model.train()
    # everything with parameters or randomness stays in eval mode
    for mod_name, module in backbone.named_modules():
        if mod_name and (any(True for _ in module.parameters(recurse=False))
                         or isinstance(module, nn.Dropout)):
            assert not module.training, mod_name
    assert model.decode_head.training
    # no gradient reaches the backbone through a training loss
    feats = model.extract_feat(torch.rand(1, 3, 64, 64))
    assert not feats[0].requires_grad
