"""The commands of README.md and of the docs pages it links, run from their
own text (readme_runner.py).

The converters (docs/tools.md) write the files the shipped configs load
(each is loaded, strictly, by a config that names it); ``tools/infer.py``
(docs/inference.md) runs on the user's images with the converted and
trained checkpoints; README's "Reproduce a paper row" walk goes from the
released weights to a metric and pictures.
"""
import json
import os
import os.path as osp
import shlex

import pytest
from checkpoint_makers import (MAKERS, checkpoint_refs, load_config,
                               loaded_from, prepare_model)
from PIL import Image
from readme_blocks import find_block
from readme_runner import ReadmeRunner

from mmlocat.utils.pretrained import load_model_weights

pytestmark = pytest.mark.e2e

README = 'README.md'
TOOLS = 'docs/tools.md'
INFERENCE = 'docs/inference.md'
# A shipped config that loads each converted file: through its backbone's
# init_cfg, or (the DINO towers) as the checkpoint tools/test.py is given in
# configs/last/README.md.
LOADED_BY = {
    'checkpoints/locat-b_in1k.pth': 'configs/locat/upernet_locat-b_ade20k.py',
    'checkpoints/last-b_in1k.pth': 'configs/last/upernet_last-b_ade20k.py',
    'checkpoints/clip-vit-b16_mmlocat.pth':
    'configs/ovd/fvit_clip-b16_ov-coco.py',
    'checkpoints/eva02-clip-b16_mmlocat.pth':
    'configs/last/zeroshot_eva02-clip-b16_voc20.py',
    'checkpoints/dino-s_mmlocat.pth': 'configs/last/corloc_dino-s_voc07.py',
}


def converters():
    return find_block(TOOLS, 'locat2mmlocat.py  locatvit_base.safetensors')


def infer_block():
    return find_block(INFERENCE, 'python tools/infer.py photo.jpg')


def test_converters(new_root, monkeypatch):
    root = new_root()
    block = converters()
    ReadmeRunner(root).run(block)
    outputs = [
        shlex.split(c.text, comments=True)[3] for c in block.commands()
        if 'model_converters' in c.text
    ]
    assert sorted(outputs) == sorted(LOADED_BY)
    monkeypatch.chdir(root.path)
    for output in outputs:
        # a path the configs (or a README's test command) name
        assert output in MAKERS, f'{output}: no shipped config names it'
        cfg = load_config(LOADED_BY[output])
        model = prepare_model(cfg, root.made)
        if output in [p for _, p in checkpoint_refs(cfg)]:
            model.init_weights()
            assert loaded_from(model, cfg), output
        else:  # what tools/test.py loads it with (strict: raises)
            load_model_weights(model, root.abs(output))


def test_infer(new_root):
    root = new_root()
    runner = ReadmeRunner(root)
    runner.run(converters(), lines=[1, 2])  # the LocAtViT-B UperNet loads
    runner.run(infer_block(), lines=[1, 4])
    with open(root.abs('out/photo.jpg.json')) as f:
        record = json.load(f)
    assert len(record['topk']) == 5
    with open(root.abs('out/big.jpg.json')) as f:
        record = json.load(f)
    assert max(record['inference_shape']) == 1024
    labels = Image.open(root.abs('out/big.jpg.labels.png'))
    assert labels.size == (1500, 1100)  # mapped back to the image
    assert osp.isfile(root.abs('out/big.jpg.png'))


def test_infer_run_time_vocabulary(new_root):
    root = new_root()
    runner = ReadmeRunner(root)
    runner.run(converters(), lines=[1, 4])  # the OpenAI CLIP B/16 tower
    runner.run(infer_block(), lines=[3])
    for name in ('a.jpg', 'b.png'):
        with open(root.abs(f'out/{name}.json')) as f:
            record = json.load(f)
        # every pixel labelled with one of the typed names
        assert {c['cls']
                for c in record['classes']} <= {'cat', 'sofa', 'window'}
        assert sum(c['pixels'] for c in record['classes']) == 96 * 128


def test_make_tiny_datasets(new_root):
    root = new_root()
    ReadmeRunner(root).run(
        find_block(TOOLS, 'make_tiny_datasets.py --root data/tiny'))
    assert osp.isdir(root.abs('data/tiny/ade/ADEChallengeData2016'))


def test_reproduce_a_paper_row(new_root):
    """Released weights -> converted file -> data check -> training ->
    test -> pictures, as README's walk types them (shrunk)."""
    root = new_root()
    block = find_block(README, 'locat2mmlocat.py locatvit_tiny.safetensors')
    outputs = ReadmeRunner(root).run(block, lines=[1, 2, 3, 4, 6, 7])
    _, train, test = outputs[2:5]
    assert osp.isfile(root.abs('checkpoints/locat-t_in1k.pth'))
    assert 'mIoU' in train and 'mIoU' in test
    work = root.abs('work_dirs/probe_locat-t_ade20k')
    assert [n for n in os.listdir(work) if n.startswith('iter_')]
    pictures = os.listdir(root.abs('out'))
    assert any(n.endswith('.png') for n in pictures)
    assert any(n.endswith('.json') for n in pictures)
