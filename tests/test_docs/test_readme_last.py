"""configs/last/README.md's commands and snippets, from its own text.

Zero-shot segmentation: every image tower converts, one dump and one test
per command shape run (EVA02-CLIP B/16 and its LaSt twin, MetaCLIP B/16,
on VOC20: one value of their loops over the datasets) and every other
command (each loop value) is checked against them: its config loads,
its inputs are placeholders or earlier outputs, a dump writes the file its
config reads and a test names the checkpoint its config loads. CorLoc,
coarse segmentation and PiB run on the converted DINO / supervised towers;
the LaSt-CLIP conversions record the file the text tower reads.
"""
import hashlib
import json
import os
import os.path as osp
import shutil

import pytest
import torch
from checkpoint_makers import (load_config, loaded_from, prepare_model,
                               save_training_checkpoint)
from mmengine.config import Config
from readme_blocks import find_block
from readme_runner import ReadmeRunner, take

pytestmark = pytest.mark.e2e

README = 'configs/last/README.md'
ZEROSHOT = 'configs/last/zeroshot_'


def block(text: str):
    return find_block(README, text)


def weights():
    return block('eva02_clip2mmlocat.py checkpoints/open_clip_EVA02-L-14-336')


def dumps():
    return block(ZEROSHOT + 'clip-b16_${DATASET}.py --model')


def twin_dumps():
    return block(ZEROSHOT + 'last-clip-b16_${DATASET}.py --model')


def tests():
    return block(ZEROSHOT + 'clip-b16_${DATASET}.py checkpoints')


def cls_tests():
    return block(ZEROSHOT + 'cls-clip-b16_${DATASET}.py checkpoints')


def _all(block_):
    return range(1, len(block_.commands()) + 1)


def _sha256(path: str) -> str:
    with open(path, 'rb') as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_zeroshot(new_root):
    root = new_root()
    runner = ReadmeRunner(root)
    runner.run(weights())
    for name in ('clip-vit-b16', 'clip-vit-l14', 'eva02-clip-b16',
                 'eva02-clip-l14-336', 'metaclip-b16-fullcc',
                 'metaclip-l14-fullcc'):
        assert osp.isfile(root.abs(f'checkpoints/{name}_mmlocat.pth'))
    dump_lines = []
    for dump_block, run in ((dumps(), [3, 5]), (twin_dumps(), [3])):
        runner.run(dump_block, lines=run, values=['voc20'])
        # every loop value, the ones run included (checked as they ran)
        dump_lines += runner.check(
            dump_block, _all(dump_block), like=(dump_block, run[0]))
    # each dump writes the file its config reads, with the text tower of
    # the file its image tower was converted from (a LaSt / CLS twin: its
    # baseline's, the recipes lock the text tower)
    assert len(dump_lines) == 96
    text_towers = {}
    for args in dump_lines:
        config = args[args.index('--seg-config') + 1]
        cfg = load_config(config)
        assert args[-1] == cfg.model.text_embeddings, args
        text_towers[config] = (args[args.index('--model') + 1],
                               args[args.index('--pretrained') + 1])
    for config, (model, pretrained) in text_towers.items():
        for twin in ('last-', 'cls-'):
            config = config.replace(ZEROSHOT + twin, ZEROSHOT)
        if text_towers[config] != (model, pretrained):
            raise AssertionError(f'{config}: {model} {pretrained}, its '
                                 f'baseline {text_towers[config]}')
        tower = load_config(config).model.backbone.init_cfg.checkpoint
        record = torch.load(
            root.abs(tower), map_location='cpu',
            weights_only=False)['meta']['clip']
        assert record['name'] == model, (config, record)
        assert record['sha256'] == _sha256(root.abs(pretrained)), config
    test_block = tests()
    outputs = runner.run(test_block, lines=[5, 6, 9], values=['voc20'])
    assert len(outputs) == 3 and all('mIoU' in out for out in outputs)
    test_lines = runner.check(
        test_block, _all(test_block), like=(test_block, 5))
    test_lines += runner.check(
        cls_tests(), _all(cls_tests()), like=(test_block, 5))
    # each test names the checkpoint its config's tower loads
    assert len(test_lines) == 96
    for config, checkpoint in test_lines:
        cfg = load_config(config)
        assert checkpoint == cfg.model.backbone.init_cfg.checkpoint, config


def test_zeroshot_openai(new_root):
    root = new_root()
    runner = ReadmeRunner(root)
    runner.run(weights(), lines=[1])
    runner.run(dumps(), lines=[1], values=['voc20'])
    out, = runner.run(tests(), lines=[1], values=['voc20'])
    assert 'mIoU' in out
    # the other datasets of the two loops
    assert len(runner.check(dumps(), [1], like=(dumps(), 1))) == 6
    assert len(runner.check(tests(), [1], like=(tests(), 1))) == 6


def test_coco_object(new_root):
    root = new_root()
    runner = ReadmeRunner(root)
    runner.run(block('coco_object.py \\\n    data/coco_stuff164k'))
    runner.run(block('coco_object.py --source instances'))
    for folder in ('data/coco_stuff164k/coco_object/val2017',
                   'data/coco/coco_object/val2017'):
        names = os.listdir(root.abs(folder))
        assert names and all(n.endswith('.png') for n in names), folder


def test_coarseseg_corloc_and_pib(new_root):
    root = new_root()
    runner = ReadmeRunner(root)
    runner.run(block('coco20k.py \\'))
    assert osp.isfile(root.abs('data/coco/annotations/coco20k.json'))
    released = block('dino2mmlocat.py dino0080.pth')
    outputs = runner.run(released, lines=[1, 2, 3, 5])
    assert all('corloc' in out.lower() for out in outputs[2:])
    runner.check(released, [4], like=(released, 3))
    dino = block('dino2mmlocat.py dino_deitsmall16_pretrain.pth')
    runner.run(dino, lines=[1, 2])
    runner.check(dino, [3, 4, 5], like=(released, 3))
    runner.run(block('last_vit2mmlocat.py ViT_190k.pth'))
    coarse = block('coarseseg_vit-s_voc12.py')
    out, = runner.run(coarse, lines=[2])
    assert 'mIoU' in out
    runner.check(coarse, [1, 3, 4, 5, 6], like=(coarse, 2))
    recipes = block('pib_last-b_in1k_public.py')
    train, pib = runner.run(recipes, lines=[2, 3])
    assert osp.isfile(root.abs('work_dirs/upernet_last-b_ade20k/iter_2.pth'))
    assert 'mIoU' in train and 'pib' in pib.lower()
    runner.check(recipes, [4], like=(recipes, 3))


def test_tsv_captions(new_root, monkeypatch):
    """The TSV snippet in a LaSt-CLIP recipe reads a CC3M-style TSV with a
    header (``filepath<TAB>title``) and yields tokenised samples."""
    from mmengine.registry import DATASETS, init_default_scope

    from mmlocat.testing import generate
    root = new_root()
    paths = generate('captions', root.abs('scratch'), 2, 2, (48, 64))
    shutil.copytree(paths['data_root'], root.abs('data/cc3m'))
    with open(osp.join(paths['data_root'], paths['train_tsv'])) as f:
        rows = f.read()
    with open(root.abs('data/cc3m/cc3m_train.tsv'), 'w') as f:
        f.write('filepath\ttitle\n' + rows)
    snippet = take(block("type='mmlocat.TsvCaptionDataset'"))
    with open(root.abs('my_clip.py'), 'w') as f:
        f.write("_base_ = './configs/last/clip_last-b16_8xb64_cc3m.py'\n" +
                snippet)
    monkeypatch.chdir(root.path)
    cfg = Config.fromfile('my_clip.py')
    init_default_scope(cfg.default_scope)  # the recipe's, as its runner
    dataset = DATASETS.build(cfg.train_dataloader.dataset)
    assert len(dataset) == rows.count('\n')
    sample = dataset[0]
    assert sample['inputs'].shape[-2:] == (224, 224)


def test_lastclip_conversion(new_root):
    """The image towers record the very files the text towers read."""
    root = new_root()
    ReadmeRunner(root).run(block('&& cp ViT-B-16.pt checkpoints/ViT-B-16.pt'))
    for converted, text in (('clip-vit-b16', 'ViT-B-16.pt'),
                            ('eva02-clip-b16', 'open_clip_EVA02-B-16.bin')):
        meta = torch.load(
            root.abs(f'checkpoints/{converted}_mmlocat.pth'),
            map_location='cpu',
            weights_only=False)['meta']
        assert meta['clip']['sha256'] == _sha256(
            root.abs(f'checkpoints/{text}')), converted


def test_unlocked_text_tower(new_root, monkeypatch):
    """A run with ``model.lock_text=False`` converts with ``--text-out`` and
    its text tower dumps the ImageNet embeddings."""
    root = new_root()
    runner = ReadmeRunner(root, subs=dict(RUN='clip_last-b16_unlocked'))
    runner.run(
        block('&& cp ViT-B-16.pt checkpoints/ViT-B-16.pt'), lines=[1, 2])
    cfg = load_config('configs/last/clip_last-b16_8xb64_cc3m.py')
    cfg.model.lock_text = False
    with monkeypatch.context() as m:
        m.chdir(root.path)
        model = prepare_model(cfg, root.made)
        model.init_weights()
        os.makedirs('work_dirs/clip_last-b16_unlocked')
        save_training_checkpoint(
            model, cfg, 'work_dirs/clip_last-b16_unlocked/iter_11550.pth')
    runner.run(block('--text-out checkpoints/last-clip-vit-b16_text.pth'))
    meta = torch.load(
        root.abs('checkpoints/last-clip-vit-b16_mmlocat.pth'),
        map_location='cpu',
        weights_only=False)['meta']
    # the image tower names the trained text tower, which the dump read
    assert meta['clip']['sha256'] == _sha256(
        root.abs('checkpoints/last-clip-vit-b16_text.pth'))
    with open(
            root.abs('data/imagenet/embeddings/'
                     'imagenet_last-clip-vit-b16.json')) as f:
        record = json.load(f)
    assert record['text_model']['sha256'] == meta['clip']['sha256']


def test_zeroshot_imagenet(new_root):
    root = new_root()
    runner = ReadmeRunner(root)
    runner.run(
        block('&& cp ViT-B-16.pt checkpoints/ViT-B-16.pt'), lines=[1, 2])
    _, last, cls = runner.run(
        block('--imagenet --model ViT-B-16-quickgelu '
              '--pretrained checkpoints/ViT-B-16.pt'))
    assert 'top1' in last.lower() and 'top1' in cls.lower()


def test_existing_config(new_root, monkeypatch):
    """The LaSt-ViT snippet (on mmseg's ViT UperNet) builds and loads the
    converted release strictly."""
    root = new_root()
    ReadmeRunner(root).run(block('last_vit2mmlocat.py ViT_190k.pth'))
    snippet = take(block("type='mmlocat.LaStViT'"))
    with open(root.abs('my_upernet.py'), 'w') as f:
        f.write(snippet)
    monkeypatch.chdir(root.path)
    cfg = Config.fromfile('my_upernet.py')
    model = prepare_model(cfg, root.made)
    model.init_weights()
    assert loaded_from(model, cfg)
