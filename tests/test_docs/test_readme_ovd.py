"""configs/ovd/README.md's chains, from its own text.

Each release format of the CLIP towers goes the documented way: convert
the image tower, dump the text embeddings with the same CLIP's text tower,
build F-ViT (the embedding file's CLIP is checked against the tower's
record) and test it; CLIPSelf's released embeddings and detector convert
and test, also in fp16 as F-ViT tests.
"""
import json

import pytest
from checkpoint_makers import loaded_from, prepare_model
from mmengine.config import Config
from readme_blocks import find_block
from readme_runner import ReadmeRunner, take

pytestmark = pytest.mark.e2e

README = 'configs/ovd/README.md'


def block(text: str):
    return find_block(README, text)


def data():
    return block('make_ov_coco.py data/coco/annotations')


def train_test():
    return block('tools/dist_train.sh configs/ovd/fvit_clip-b16_ov-coco.py')


def eva_converters():
    return block('eva02_clip2mmlocat.py EVA02_CLIP_B_psz16_s8B.pt')


def fp16_test():
    return block('CHECKPOINT --cfg-options model.test_cfg.autocast=float16')


def _tested_in_fp16(root, output):
    """The test ran to its end with the fp16 autocast of the command line
    (a random-init detector's scores sit near the threshold: the tiny
    images may end with no detection, which mmdet reports instead of AP)."""
    assert 'Epoch(test) [2/2]' in output
    dumped = Config.fromfile(
        root.abs('work_dirs/fvit_eva02-clip-b16_ov-coco/'
                 'fvit_eva02-clip-b16_ov-coco.py'))
    assert dumped.model.test_cfg.autocast == 'float16'


def _text_model(root, npy):
    with open(root.abs(npy[:-4] + '.json')) as f:
        return json.load(f)['text_model']


@pytest.mark.slow
def test_laion_chain(new_root):
    """open_clip's exact-GELU ViT-B-16 state dict, end to end."""
    root = new_root()
    runner = ReadmeRunner(root)
    runner.run(data())
    runner.run(block('checkpoints/ViT-B-16.bin checkpoints/clip-vit-b16'))
    text = _text_model(root, 'data/coco/embeddings/ov-coco_clip-vit-b16.npy')
    assert text['name'] == 'ViT-B-16'
    _, test = runner.run(train_test(), lines=[2, 3])
    assert 'coco/novel_ap50' in test


def test_openai_chain(new_root):
    """OpenAI's TorchScript release, end to end (QuickGELU)."""
    root = new_root()
    runner = ReadmeRunner(root)
    runner.run(data())
    runner.run(
        block('--model ViT-B-16-quickgelu --pretrained '
              'checkpoints/ViT-B-16.pt'))
    runner.run(block('clip2mmlocat.py checkpoints/ViT-B-16.pt'))
    _, test = runner.run(train_test(), lines=[2, 3])
    assert 'coco/novel_ap50' in test


def test_clipself_detectors(new_root):
    """CLIPSelf's embedding files and F-ViT checkpoint, converted, tested
    (fp32, then fp16 as F-ViT)."""
    root = new_root()
    runner = ReadmeRunner(root)
    runner.run(data(), lines=[1])
    runner.run(eva_converters(), lines=[1, 2])
    runner.run(block('clipself_embeddings2npy.py F-ViT'))
    detectors = block('clipself_fvit2mmlocat.py')
    _, test = runner.run(detectors, lines=[1, 2])
    fp16, = runner.run(detectors, lines=[3])
    assert 'coco/novel_ap50' in test
    # CLIPSelf's embedding files name their CLIP only: the opt-out is logged
    assert 'check_clip=False' in test and 'without checking' in test
    _tested_in_fp16(root, fp16)


@pytest.mark.slow
def test_eva02_chain(new_root):
    """The EVA repo's image tower with open_clip's text tower of the same
    model (two files of one CLIP), tested in fp16."""
    root = new_root()
    runner = ReadmeRunner(root)
    runner.run(data(), lines=[1])
    runner.run(eva_converters())
    runner.run(
        block('--model EVA02-B-16 --pretrained '
              'checkpoints/open_clip_EVA02-B-16.bin'))
    fp16, = runner.run(
        fp16_test(),
        subs=dict(
            CHECKPOINT='work_dirs/fvit_eva02-clip-b16_ov-coco/epoch_3.pth'))
    _tested_in_fp16(root, fp16)


def test_eva02_l14_conversion(new_root, monkeypatch):
    """The EVA repo's L/14-336 loads strictly into its F-ViT config."""
    root = new_root()
    ReadmeRunner(root).run(eva_converters(), lines=[1, 3])
    monkeypatch.chdir(root.path)
    cfg = Config.fromfile('configs/ovd/fvit_eva02-clip-l14-336_ov-coco.py')
    model = prepare_model(cfg, root.made)
    model.init_weights()
    assert loaded_from(model, cfg)


def test_own_mmdet_config(new_root, monkeypatch):
    """The snippet in an mmdet Faster R-CNN config: builds, loads the
    converted tower strictly."""
    root = new_root()
    ReadmeRunner(root).run(
        block('checkpoints/ViT-B-16.bin checkpoints/clip-vit-b16'),
        lines=[1, 2])
    snippet = take(block("type='mmlocat.CLIPViT', arch='b'"))
    path = root.abs('my_detector.py')
    with open(path, 'w') as f:
        f.write("_base_ = 'mmdet::_base_/models/faster-rcnn_r50_fpn.py'\n" +
                snippet)
    monkeypatch.chdir(root.path)
    cfg = Config.fromfile(path)
    model = prepare_model(cfg, root.made)
    model.init_weights()
    assert loaded_from(model, cfg)
