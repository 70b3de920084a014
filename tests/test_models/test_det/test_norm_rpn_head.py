"""NormRPNHead: F-ViT's OV-LVIS RPN (norm after each shared conv)."""
import torch
from mmcv.cnn import ConvModule
from mmdet.models.dense_heads import RPNHead
from torch import nn

from mmlocat.models.det import NormRPNHead

CFG = dict(
    in_channels=8,
    feat_channels=8,
    num_convs=2,
    anchor_generator=dict(
        type='AnchorGenerator',
        scales=[8],
        ratios=[0.5, 1.0, 2.0],
        strides=[4, 8]))


def test_norm_after_each_shared_conv():
    head = NormRPNHead(norm_cfg=dict(type='BN'), **CFG)
    convs = list(head.rpn_conv)
    assert len(convs) == 2 and all(isinstance(c, ConvModule) for c in convs)
    for conv in convs:
        assert isinstance(conv.norm, nn.BatchNorm2d)
        assert conv.conv.bias is None  # the norm carries the bias
    cls, reg = head([torch.randn(2, 8, 16, 16), torch.randn(2, 8, 8, 8)])
    assert cls[0].shape == (2, 3, 16, 16) and reg[1].shape == (2, 12, 8, 8)


def test_without_norm_it_is_mmdets_rpn_head():
    ours, host = NormRPNHead(**CFG), RPNHead(**CFG)
    assert str(ours.rpn_conv) == str(host.rpn_conv)
    assert set(ours.state_dict()) == set(host.state_dict())
