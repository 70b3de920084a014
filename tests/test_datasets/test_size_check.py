"""CheckAnnotatedSize and LOST's decoding (PIL, no EXIF rotation) on a real
EXIF-rotated JPEG, through mmcv's LoadImageFromFile and the CorLoc /
coarse-segmentation pipelines of the shipped configs."""
import os.path as osp

import numpy as np
import pytest
from mmcv.transforms import LoadImageFromFile
from PIL import Image

from mmlocat.datasets import CheckAnnotatedSize

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def _exif_rotated_jpeg(path, hw=(30, 40)):
    """A 30x40 (h x w) JPEG whose EXIF says "rotate 90 degrees" (6)."""
    rng = np.random.default_rng(0)
    image = Image.fromarray(rng.integers(0, 255, (*hw, 3), dtype=np.uint8))
    exif = Image.Exif()
    exif[0x0112] = 6
    image.save(path, exif=exif, quality=95)
    return str(path)


def _load(path, **kwargs):
    return LoadImageFromFile(**kwargs)(dict(img_path=path))


def test_exif_rotation_is_caught_and_lost_decoding_avoids_it(tmp_path):
    path = _exif_rotated_jpeg(tmp_path / 'rot.jpg')
    check = CheckAnnotatedSize()
    rotated = _load(path)  # mmcv's default applies the EXIF orientation
    assert rotated['img'].shape[:2] == (40, 30)
    with pytest.raises(ValueError, match=r'rot.jpg decodes as 40x30 .* 30x40'):
        check(dict(rotated, ann_img_shape=(30, 40)))
    lost = _load(
        path, color_type='color_ignore_orientation', imdecode_backend='pillow')
    assert check(dict(lost, ann_img_shape=(30, 40))) is not None
    # the pixels are PIL's, as LOST's Image.open(...).convert('RGB')
    with Image.open(path) as img:
        np.testing.assert_array_equal(lost['img'][..., ::-1],
                                      np.asarray(img.convert('RGB')))


def test_label_map_and_missing_size(tmp_path):
    img = dict(img=np.zeros((6, 8, 3), np.uint8), img_path='x.jpg')
    check = CheckAnnotatedSize()
    assert check(dict(img, gt_seg_map=np.zeros((6, 8), np.uint8)))
    with pytest.raises(ValueError, match='x.jpg .* label map says 8x6'):
        check(dict(img, gt_seg_map=np.zeros((8, 6), np.uint8)))
    with pytest.raises(ValueError, match='no annotated size for x.jpg'):
        check(img)


@pytest.mark.parametrize('config', [
    'corloc_dino-s_voc07.py', 'corloc_dino-s_coco20k.py',
    'coarseseg_last-s_voc12.py'
])
def test_shipped_pipelines_decode_as_lost(config):
    from mmengine.config import Config
    cfg = Config.fromfile(osp.join(REPO, 'configs', 'last', config))
    pipeline = cfg.test_dataloader.dataset.pipeline
    assert pipeline[0] == dict(
        type='LoadImageFromFile',
        color_type='color_ignore_orientation',
        imdecode_backend='pillow')
    assert dict(type='mmlocat.CheckAnnotatedSize') in pipeline


def test_voc_corloc_dataset_with_an_exif_rotated_image(tmp_path):
    """The shipped VOC CorLoc dataset + pipeline on generated VOC data with
    one JPEG re-saved with an EXIF rotation: LOST's decoding scores it as
    annotated; mmcv's default decoding is an error naming the image."""
    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmpretrain.registry import DATASETS

    from mmlocat.testing import generate
    voc = generate('pascal_voc', str(tmp_path), 2, 1, (48, 64))
    jpg = osp.join(voc['data_root'], 'JPEGImages', '2012_000001.jpg')
    with Image.open(jpg) as img:
        pixels = img.convert('RGB')
    exif = Image.Exif()
    exif[0x0112] = 6
    pixels.save(jpg, exif=exif, quality=95)
    cfg = Config.fromfile(
        osp.join(REPO, 'configs', 'last', 'corloc_dino-s_voc12.py'))
    data = cfg.test_dataloader.dataset
    data.data_root = voc['data_root']
    data.expected_num_images = 3
    init_default_scope('mmpretrain')
    dataset = DATASETS.build(data)
    item = dataset[1]
    assert item['data_samples'].img_path == jpg
    assert tuple(item['inputs'].shape[-2:]) == (48, 64)
    data.pipeline[0] = dict(type='LoadImageFromFile')  # mmcv's default
    with pytest.raises(ValueError, match='2012_000001.jpg decodes as 64x48'):
        DATASETS.build(data)[1]
