"""``tools/test.py`` never reports metrics of a partly random network.

The checkpoints of the issue-15 drill, built at random init and saved as
files: a torchvision ResNet-18 state dict, a 48-wide ('S') checkpoint under
the 32-wide ('T') config, and the plain-ViT twin's checkpoint under the
LocAt config (GAug would stay random). Each is refused before any metric is
computed, with one ``test.py: error:`` line and exit status 2, unless
``--allow-partial-checkpoint`` is given. The file is read once (by the
loader front-end, not again by the Runner), and the Runner's
``after_load_checkpoint`` hooks still get it.
"""
import copy
import os
import os.path as osp
import runpy
import shutil
import sys

import pytest
import torch
import torchvision
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.registry import HOOKS, init_default_scope
from mmpretrain.registry import MODELS
from tiny_cls import write_tiny_cls_config

from mmlocat.testing import generate
from mmlocat.utils import checkpoint_io

pytestmark = pytest.mark.e2e


@pytest.fixture(scope='module')
def setup(tmp_path_factory, repo_root):
    root = tmp_path_factory.mktemp('policy')
    data = generate(
        'imagenet',
        str(root / 'data'),
        num_train=1,
        num_val=1,
        img_size=(32, 32),
        seed=0)['data_root']
    config = write_tiny_cls_config(
        str(root / 'tiny.py'),
        repo_root,
        data,
        iters=1,
        batch_size=2,
        random_train=False)
    # test with the val split (the derived config is train-only)
    with open(config, 'a') as f:
        f.write('test_dataloader = dict(batch_size=2, num_workers=0, '
                "sampler=dict(type='DefaultSampler', shuffle=False), "
                "dataset=dict(type='ImageNet', data_root=%r, split='val', "
                "pipeline=train_dataloader['dataset']['pipeline']))\n"
                "test_evaluator = dict(type='Accuracy', topk=(1, ))\n"
                'test_cfg = dict()\n' % data)
    cfg = Config.fromfile(config)
    init_default_scope('mmpretrain')

    def model(**backbone):
        model_cfg = copy.deepcopy(cfg.model)
        model_cfg.backbone.update(backbone)
        return MODELS.build(model_cfg)

    def save(name, state_dict):
        path = str(root / name)
        torch.save(dict(state_dict=state_dict, meta={}), path)
        return path

    torch.manual_seed(0)
    wide = dict(
        embed_dims=48, num_layers=2, num_heads=2, feedforward_channels=96)
    return dict(
        config=config,
        root=root,
        good=save('good.pth',
                  model().state_dict()),
        resnet=save('resnet18.pth',
                    torchvision.models.resnet18().state_dict()),
        other_arch=save(
            'wide.pth', {
                k: v
                for k, v in model(arch=wide).state_dict().items()
                if not k.startswith('head.')
            } | {
                k: v
                for k, v in model().state_dict().items()
                if k.startswith('head.')
            }),
        vit_twin=save('vit_twin.pth',
                      model(gaug=False, prr=False).state_dict()),
    )


def _test_tool(repo_root, monkeypatch, capsys, config, checkpoint, work,
               *extra):
    script = osp.join(repo_root, 'tools', 'test.py')
    monkeypatch.setattr(
        sys, 'argv', [script, config, checkpoint, '--work-dir', work, *extra])
    monkeypatch.chdir(repo_root)
    code = 0
    try:
        runpy.run_path(script, run_name='__main__')
    except SystemExit as exit_info:
        code = exit_info.code
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize('case,phrase', [
    ('resnet', 'missing keys'),
    ('other_arch', 'another shape'),
    ('vit_twin', 'attn.gaug'),
])
def test_partial_checkpoint_is_refused(case, phrase, setup, repo_root,
                                       monkeypatch, capsys):
    code, out = _test_tool(repo_root, monkeypatch, capsys, setup['config'],
                           setup[case], str(setup['root'] / f'w_{case}'))
    assert code == 2, out[-3000:]
    errors = [
        line for line in out.splitlines() if line.startswith('test.py: error')
    ]
    assert len(errors) == 1, out[-3000:]
    assert phrase in errors[0] and '--allow-partial-checkpoint' in errors[0]
    assert 'accuracy/top1' not in out


@pytest.mark.parametrize('case', ['good', 'vit_twin', 'other_arch'])
def test_covering_or_allowed_checkpoint_is_evaluated(case, setup, repo_root,
                                                     monkeypatch, capsys):
    extra = ('--allow-partial-checkpoint', ) if case != 'good' else ()
    code, out = _test_tool(repo_root, monkeypatch, capsys,
                           setup['config'], setup[case],
                           str(setup['root'] / f'w_{case}'), *extra)
    assert code == 0, out[-3000:]
    assert 'accuracy/top1' in out
    if case == 'vit_twin':
        assert 'newly initialised' in out and 'attn.gaug' in out
    if case == 'other_arch':
        assert '--allow-partial-checkpoint: ' in out
        assert 'another shape' in out


def test_checkpoint_is_read_once(setup, repo_root, monkeypatch, capsys):
    """The front-end reads the file; the Runner reads nothing: the file is
    removed right after the first read (any second read, by mmengine or
    by us, would fail) and the run still tests the loaded model."""
    path = str(setup['root'] / 'read_once.pth')
    shutil.copy(setup['good'], path)
    reads = []
    read = checkpoint_io.read_checkpoint

    def read_then_remove(source, *args, **kwargs):
        obj = read(source, *args, **kwargs)
        if source == path:
            reads.append(source)
            os.remove(source)
        return obj

    monkeypatch.setattr(checkpoint_io, 'read_checkpoint', read_then_remove)
    code, out = _test_tool(repo_root, monkeypatch, capsys, setup['config'],
                           path, str(setup['root'] / 'w_once'))
    assert code == 0, out[-3000:]
    assert reads == [path]
    assert 'accuracy/top1' in out
    assert f'of {path} into ImageClassifier' in out


@HOOKS.register_module(force=True)
class SetBiasOnLoadHook(Hook):
    """Changes the checkpoint it is given (as mmpretrain's ``EMAHook``
    swaps its copy in) and records what the model tests with."""
    seen = {}

    def after_load_checkpoint(self, runner, checkpoint):
        state = checkpoint['state_dict']
        key = 'head.layers.head.bias'  # VisionTransformerClsHead
        state[key] = torch.full_like(state[key], 0.5)
        self.seen['meta'] = checkpoint.get('meta')

    def before_test_epoch(self, runner):
        self.seen['bias'] = runner.model.head.layers.head.bias.detach().clone()


def test_after_load_checkpoint_hooks_see_the_checkpoint(
        setup, repo_root, monkeypatch, capsys):
    """As with the Runner's own ``load_from``: the hooks get the checkpoint
    after ``before_run`` and the model tests with the weights they leave.
    """
    config = str(setup['root'] / 'with_hook.py')
    with open(setup['config']) as src, open(config, 'w') as dst:
        dst.write(src.read() + "\ncustom_hooks = [dict(type='"
                  "SetBiasOnLoadHook')]\n")
    SetBiasOnLoadHook.seen.clear()
    code, out = _test_tool(repo_root, monkeypatch, capsys, config,
                           setup['good'], str(setup['root'] / 'w_hook'))
    assert code == 0, out[-3000:]
    assert SetBiasOnLoadHook.seen['meta'] == {}
    assert torch.equal(SetBiasOnLoadHook.seen['bias'],
                       torch.full_like(SetBiasOnLoadHook.seen['bias'], 0.5))


def test_a_second_checkpoint_in_cfg_options_is_refused(setup, repo_root,
                                                       monkeypatch, capsys):
    code, out = _test_tool(repo_root, monkeypatch, capsys,
                           setup['config'], setup['good'],
                           str(setup['root'] / 'w_twice'), '--cfg-options',
                           f'load_from={setup["resnet"]}')
    assert code == 2
    errors = [
        line for line in out.splitlines() if line.startswith('test.py: error')
    ]
    assert len(errors) == 1 and 'load_from=' in errors[0], out[-3000:]
