"""Issue 36's proof: one shipped config per family runs on CPU from the
tiny data (``tools/dataset_converters/make_tiny_datasets.py``) with the
documented smoke-trial switches only (docs/tools.md, "Smoke trials"):
``--data-root`` plus the overrides listed there; an evaluation-only
recipe evaluates its model as built (``tools/misc/init_checkpoint.py``).
The tools run as ``python tools/train.py ...`` would, each in its own
process (helpers.harness.run_tool, isolated: the models are full size).

The recipes that read text-embedding files (zero-shot segmentation,
F-ViT, LaSt-CLIP's zero-shot ImageNet test) get them from
``dump_text_embeddings.py --random-text-tower`` (one template a name); the
tests, whose tower checkpoint records no CLIP, opt out of the CLIP pairing
check (``check_clip=False``, logged). F-ViT with a random tower (no
``init_cfg``) has no tower checkpoint to pair.

Not here, for a reason (docs/tools.md): CIFAR-100 (mmpretrain's CIFAR100
reads only the release's files, by md5)."""
import os.path as osp

import pytest
from helpers.harness import run_tool

from mmlocat.testing import DEFAULT_SUBDIRS, generate

KINDS = ('ade20k', 'pascal_voc', 'pascal_voc07', 'coco', 'lvis', 'imagenet',
         'mini_imagenet', 'coco20k', 'coco_captions', 'cc3m')

# docs/tools.md "Smoke trials": the overrides per kind of recipe
ITERS = ['train_cfg.max_iters=1', 'train_dataloader.batch_size=2']
EPOCHS = [
    'train_cfg.max_epochs=1', 'train_dataloader.batch_size=2',
    'train_dataloader.dataset.indices=2'
]
NO_WEIGHTS = ['model.backbone.init_cfg=None']
LAST_CLIP = [
    'model.image_encoder.init_cfg=None', 'model.text_encoder.weights=None',
    'model.init_logit_scale=2.6593'
]
CORLOC = ['test_dataloader.dataset.expected_num_images=None']
# a recipe reading text embeddings of a random text tower
NO_CLIP_CHECK = ['model.check_clip=False']

# (family, config, options) of the training recipes
TRAIN = [
    ('locat-in1k', 'configs/locat/locat-t_8xb128_in1k.py', EPOCHS),
    ('locat-mini-imagenet', 'configs/locat/locat-t_mini-imagenet.py', EPOCHS),
    ('locat-probe', 'configs/locat/probe_locat-t_ade20k.py',
     ITERS + NO_WEIGHTS),
    ('locat-upernet', 'configs/locat/upernet_locat-t_ade20k.py',
     ITERS + NO_WEIGHTS),
    ('last-in1k', 'configs/last/last-b_8xb512_in1k.py', EPOCHS),
    ('last-clip-cc3m', 'configs/last/clip_last-b16_8xb64_cc3m.py',
     ITERS + LAST_CLIP),
    ('last-clip-coco-caption',
     'configs/last/clip_last-b16_8xb64_coco-caption-no-lvis-val.py',
     ITERS + LAST_CLIP),
]

# (family, config, options) of the evaluation-only recipes
TEST = [
    ('last-pib', 'configs/last/pib_last-b_in1k.py', []),
    ('last-coarseseg', 'configs/last/coarseseg_last-s_voc12.py', []),
    ('last-corloc-voc07', 'configs/last/corloc_dino-s_voc07.py', CORLOC),
    ('last-corloc-voc12', 'configs/last/corloc_dino-s_voc12.py', CORLOC),
    ('last-corloc-coco20k', 'configs/last/corloc_dino-s_coco20k.py', CORLOC),
]

ZERO_SHOT = NO_WEIGHTS + NO_CLIP_CHECK + ['model.templates=single']
# (family, config, dump_text_embeddings.py arguments, the embedding file
# under the data root, the tool that runs the recipe, options)
WITH_TEXT = [
    ('zero-shot-seg', 'configs/last/zeroshot_clip-b16_voc20.py', [
        '--seg-config', 'configs/last/zeroshot_clip-b16_voc20.py',
        '--cfg-options', *ZERO_SHOT
    ], 'embeddings/voc20_clip-b16.npy', 'tools/test.py', ZERO_SHOT),
    ('fvit-ov-coco', 'configs/ovd/fvit_clip-b16_ov-coco.py', [
        '--background', '--ann-file',
        '{root}/coco/annotations/instances_val2017_all_2.json', '--templates',
        'single'
    ], 'coco/embeddings/ov-coco_clip-vit-b16.npy', 'tools/train.py',
     EPOCHS + NO_WEIGHTS),
    ('last-clip-zero-shot-imagenet',
     'configs/last/clip_last-b16_8xb64_cc3m.py',
     ['--imagenet', '--templates',
      'single'], 'imagenet/embeddings/imagenet_clip-vit-b16.npy',
     'tools/test.py', LAST_CLIP +
     ['test_evaluator.templates=single', 'test_evaluator.check_clip=False']),
]

# The recipes' models are full size (ViT-B, CLIP B/16) and their data
# loaders fork workers: in the test process, each fork copied a process
# grown by the whole suite (a full run was killed for memory).
FULL_SIZE = 'full-size recipes whose data loaders fork workers'


@pytest.fixture(scope='module')
def tiny_root(tmp_path_factory):
    """What ``make_tiny_datasets.py --root ROOT --num-train 2 --num-val 1
    --size 32 32`` writes (the kinds these recipes read)."""
    root = str(tmp_path_factory.mktemp('tiny_data'))
    for kind in KINDS:
        generate(kind, osp.join(root, DEFAULT_SUBDIRS[kind]), 2, 1, (32, 32))
    return root


def _run(tool, *argv, options=()):
    """``python TOOL ARGV [--cfg-options OPTIONS]`` in its own process,
    which must succeed; its output."""
    extra = ['--cfg-options', *options] if options else []
    return run_tool(tool, *argv, *extra, isolate=FULL_SIZE).ok()


def _train(config, tiny_root, tmp_path, options):
    """tools/train.py from the tiny data into ``tmp_path/work``."""
    return _run(
        'tools/train.py',
        config,
        '--data-root',
        tiny_root,
        '--work-dir',
        str(tmp_path / 'work'),
        options=options)


def _evaluate(config, tiny_root, tmp_path, options):
    """tools/test.py from the tiny data on the model as built
    (init_checkpoint.py, given the same data root and options: a
    zero-shot model reads its embedding file when built)."""
    checkpoint = str(tmp_path / 'init.pth')
    data = ['--data-root', tiny_root]
    _run(
        'tools/misc/init_checkpoint.py',
        config,
        checkpoint,
        *data,
        options=options)
    return _run(
        'tools/test.py',
        config,
        checkpoint,
        *data,
        '--work-dir',
        str(tmp_path / 'work'),
        options=options)


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.parametrize(
    'family,config,options', TRAIN, ids=[t[0] for t in TRAIN])
def test_train_one_iteration(family, config, options, tiny_root, tmp_path):
    out = _train(config, tiny_root, tmp_path, options)
    assert '--data-root: ' in out
    if family == 'locat-upernet':  # each moved path is printed
        assert ('--data-root: train_dataloader.dataset.data_root: '
                f'data/ade/ADEChallengeData2016 -> {tiny_root}/ade/'
                'ADEChallengeData2016') in out
    # trained and saved: one epoch (of one iteration) or one iteration
    name = 'epoch_1.pth' if options is EPOCHS else 'iter_1.pth'
    assert osp.isfile(tmp_path / 'work' / name), out[-3000:]


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.parametrize(
    'family,config,options', TEST, ids=[t[0] for t in TEST])
def test_evaluate_once(family, config, options, tiny_root, tmp_path):
    out = _evaluate(config, tiny_root, tmp_path, options)
    assert '--data-root: ' in out
    assert 'Epoch(test) [' in out, out[-3000:]


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.parametrize(
    'family,config,dump,embeddings,tool,options',
    WITH_TEXT,
    ids=[t[0] for t in WITH_TEXT])
def test_with_random_text_embeddings(family, config, dump, embeddings, tool,
                                     options, tiny_root, tmp_path):
    """Embeddings of open_clip's random text tower where the recipe reads
    them, then its model evaluated as built or trained one iteration."""
    out = osp.join(tiny_root, embeddings)
    dumped = _run('tools/misc/dump_text_embeddings.py', out, '--model',
                  'ViT-B-16-quickgelu', '--random-text-tower',
                  *[arg.format(root=tiny_root) for arg in dump])
    assert 'text embeddings: 100%' in dumped
    if tool == 'tools/test.py':
        ran = _evaluate(config, tiny_root, tmp_path, options)
        assert 'Iter(test) [1/1]' in ran, ran[-3000:]
    else:
        ran = _train(config, tiny_root, tmp_path, options)
        assert osp.isfile(tmp_path / 'work' / 'epoch_1.pth'), ran[-3000:]
    if any(o.endswith('check_clip=False') for o in options):
        # the opt-out is logged, naming the embedding file
        assert f'check_clip=False: {out} is used with the tower' in ran
