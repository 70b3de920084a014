"""Dense outputs are contiguous NCHW, so mmdet's RoI heads read them right.

mmcv's RoIAlign reads its input as contiguous NCHW memory whatever the
strides (open-mmlab/mmcv#2203); a permuted (NHWC) feature map, and the FPN
outputs convolutions compute from it, would be pooled at the wrong places.
The reference is torchvision's ``roi_align``, which follows the strides.
"""
import pytest
import torch
from helpers.tiny_archs import tiny_vit
from mmdet.models.necks import FPN
from mmdet.models.roi_heads.roi_extractors import SingleRoIExtractor
from mmdet.utils import register_all_modules
from torchvision.ops import roi_align

from mmlocat.models.backbones import CLIPViT, EVA02CLIPViT, LaStViT, LocAtViT

BACKBONES = {
    cls.__name__: cls
    for cls in (LocAtViT, LaStViT, CLIPViT, EVA02CLIPViT)
}


def build(name: str):
    """A tiny backbone of ``name`` with two featmap outputs."""
    return BACKBONES[name](
        arch=tiny_vit(),
        img_size=64,
        patch_size=16,
        out_type='featmap',
        out_indices=(0, 1))


@pytest.mark.parametrize('name', list(BACKBONES))
def test_featmaps_are_contiguous_and_roi_pooled_right(name):
    register_all_modules()
    torch.manual_seed(0)
    backbone = build(name).eval()
    channels = backbone.embed_dims
    fpn = FPN([channels, channels], out_channels=8, num_outs=2).eval()
    extractor = SingleRoIExtractor(
        roi_layer=dict(type='RoIAlign', output_size=7, sampling_ratio=0),
        out_channels=8,
        featmap_strides=[16, 32])
    image = torch.rand(1, 3, 96, 128)
    # small boxes: mmdet maps them to the stride-16 level
    rois = torch.tensor([[0., 4., 6., 60., 50.], [0., 30., 10., 90., 70.]])
    with torch.no_grad():
        featmaps = backbone(image)
        assert all(f.is_contiguous() for f in featmaps)
        levels = fpn(featmaps)
        pooled = extractor(levels[:1], rois)
    reference = roi_align(
        levels[0],
        rois,
        output_size=7,
        spatial_scale=1 / 16,
        sampling_ratio=0,
        aligned=True)
    torch.testing.assert_close(pooled, reference, rtol=1e-5, atol=1e-5)
