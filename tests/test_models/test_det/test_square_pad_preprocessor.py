"""SquarePadDetDataPreprocessor: F-ViT's square test padding, applied after
normalisation; training batches keep mmdet's behaviour."""
import torch
from mmdet.models.data_preprocessors import DetDataPreprocessor
from mmdet.structures import DetDataSample

from mmlocat.models.det import SquarePadDetDataPreprocessor

MEAN, STD = [122.771, 116.746, 104.094], [68.501, 66.632, 70.323]


def _data(h, w):
    gen = torch.Generator().manual_seed(0)
    img = torch.randint(0, 255, (3, h, w), generator=gen, dtype=torch.uint8)
    sample = DetDataSample(metainfo=dict(img_shape=(h, w), ori_shape=(h, w)))
    return dict(inputs=[img], data_samples=[sample])


def test_test_batches_padded_to_a_square_after_normalising():
    cfg = dict(mean=MEAN, std=STD, bgr_to_rgb=True, pad_size_divisor=32)
    ours = SquarePadDetDataPreprocessor(**cfg)
    host = DetDataPreprocessor(**cfg)
    out = ours(_data(50, 90), training=False)
    ref = host(_data(50, 90), training=False)
    assert ref['inputs'].shape == (1, 3, 64, 96)  # multiple of 32 only
    assert out['inputs'].shape == (1, 3, 96, 96)
    # The image and the divisor padding are the host's; the new rows are
    # zeros in the normalised space (F-ViT pads after Normalize).
    torch.testing.assert_close(out['inputs'][..., :64, :], ref['inputs'])
    assert out['inputs'][..., 64:, :].abs().max() == 0
    meta = out['data_samples'][0].metainfo
    assert meta['batch_input_shape'] == (96, 96)
    assert meta['pad_shape'] == (96, 96)
    assert meta['img_shape'] == (50, 90)


def test_training_and_option_off_match_the_host():
    cfg = dict(mean=MEAN, std=STD, bgr_to_rgb=True, pad_size_divisor=32)
    host = DetDataPreprocessor(**cfg)
    for ours, training in ((SquarePadDetDataPreprocessor(**cfg), True),
                           (SquarePadDetDataPreprocessor(
                               test_pad_to_square=False, **cfg), False)):
        out = ours(_data(50, 90), training=training)
        ref = host(_data(50, 90), training=training)
        torch.testing.assert_close(out['inputs'], ref['inputs'])
    # Already square: unchanged.
    square = SquarePadDetDataPreprocessor(**cfg)(_data(64, 64))
    assert square['inputs'].shape == (1, 3, 64, 64)
