"""The hosts' own launchers run mmlocat's recipes as mmlocat's tools do
(issue 37).

Shipped recipes declare the runtime (``runner_type =
'mmlocat.MMLocatRunner'``, ``configs/_base_/mmlocat_runtime.py``), so the
``tools/train.py`` / ``tools/test.py`` that mmpretrain, mmseg and mmdet ship
in their wheels (``PKG/.mim/tools/``: what ``dist_train.sh``,
``slurm_train.sh`` and ``mim train`` run) build the same Runner:

* classification (the tiny LocAtViT recipe, **no seed in the config**):
  under mmpretrain's ``train.py`` a run killed with SIGKILL after a
  periodic checkpoint continues bit-identically with the host's
  ``--resume``; SIGTERM saves a checkpoint first (PreemptionHook declared
  by the runtime); the losses and checkpoint tensors of mmlocat's
  ``tools/train.py`` and the host's are identical (the same seed: the one
  the interrupted run drew); mmpretrain's ``test.py`` reads the checkpoint;
* segmentation (a shrunk UperNet recipe) under mmseg's ``train.py`` and
  detection (a shrunk F-ViT recipe, epoch-based) under mmdet's: the same
  kill -9 / ``--resume`` and the same equality with mmlocat's
  ``tools/train.py``; the host's ``test.py`` reads the result.
"""
import importlib.util
import json
import os
import os.path as osp
import signal
import subprocess
import sys

import pytest
import torch
from helpers.fvit import write_embeddings
from helpers.shrink import write_tiny_config, write_tiny_ovd_config
from tiny_cls import (paused_run, probe_env, read_losses, resume,
                      tiny_imagenet, write_tiny_cls_config)

from mmlocat.testing import generate
from mmlocat.text import names_from_annotations
from mmlocat.utils import mmengine_checkpoint_globals

pytestmark = pytest.mark.e2e

ITERS, EVERY, STOP = 6, 3, 4
PROBE_IMPORTS = ("custom_imports = dict(imports=['mmlocat', 'train_probe'], "
                 'allow_failed_imports=False)\n'
                 "custom_hooks = [dict(type='TrainProbeHook')]\n")


def host_tool(package: str, name: str) -> str:
    """``PKG/.mim/tools/NAME``: the host's own tool, from its wheel."""
    spec = importlib.util.find_spec(package)
    path = osp.join(osp.dirname(spec.origin), '.mim', 'tools', name)
    assert osp.isfile(path), path
    return path


def command(tool: str, config: str, work: str, *extra: str) -> list:
    return [sys.executable, tool, config, '--work-dir', work, *extra]


def run(cmd: list, env: dict, cwd: str, status: int = 0) -> str:
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=540)
    assert proc.returncode == status, proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def read_checkpoint(path: str) -> dict:
    with mmengine_checkpoint_globals():
        return torch.load(path, map_location='cpu', weights_only=True)


def assert_same_tensors(a: str, b: str) -> None:
    first, second = read_checkpoint(a), read_checkpoint(b)
    assert list(first['state_dict']) == list(second['state_dict'])
    for key, value in first['state_dict'].items():
        assert torch.equal(value, second['state_dict'][key]), key


def losses_of(cmd: list, env: dict, cwd: str, path: str) -> dict:
    run(cmd, probe_env(env, losses=path), cwd)
    return read_losses(path)


def check_host_launcher(config: str, package: str, tmp_path, repo_root: str,
                        env: dict, every: int, stop: int, total: int,
                        last: str, metric: str) -> None:
    """The runs every host gets: killed (SIGKILL) after iteration ``stop``,
    its last periodic checkpoint after ``every``; the host's ``--resume``
    (no seed anywhere); then, with the seed the killed run drew, mmlocat's
    ``tools/train.py`` and the host's uninterrupted. Losses (float.hex)
    and final checkpoint tensors must agree; the host's own ``test.py``
    reads the resumed run's final checkpoint and reports ``metric``."""
    train = host_tool(package, 'train.py')
    killed, killed_losses = str(tmp_path / 'killed'), str(tmp_path / 'k.txt')
    with paused_run(
            command(train, config, killed),
            probe_env(env, losses=killed_losses, pause_at=stop), repo_root,
            killed_losses) as proc:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
    with open(osp.join(killed, 'last_checkpoint')) as f:
        periodic = read_checkpoint(f.read().strip())
    assert periodic['meta']['iter'] == every
    seed = periodic['meta']['seed']
    resumed = losses_of(
        command(train, config, killed, '--resume'), env, repo_root,
        str(tmp_path / 'resumed.txt'))

    seeded = ['--cfg-options', f'randomness.seed={seed}']
    ours = losses_of(
        command('tools/train.py', config, str(tmp_path / 'ours'), *seeded),
        env, repo_root, str(tmp_path / 'ours.txt'))
    host = losses_of(
        command(train, config, str(tmp_path / 'host'), *seeded), env,
        repo_root, str(tmp_path / 'host.txt'))
    assert sorted(ours) == list(range(1, total + 1))
    assert host == ours
    assert_same_tensors(
        osp.join(tmp_path, 'ours', last), osp.join(tmp_path, 'host', last))
    killed_run = read_losses(killed_losses)
    assert {i: killed_run[i] for i in range(1, stop + 1)} == \
        {i: ours[i] for i in range(1, stop + 1)}
    assert resumed == {i: ours[i] for i in range(every + 1, total + 1)}
    assert_same_tensors(
        osp.join(killed, last), osp.join(tmp_path, 'ours', last))
    log = run([
        sys.executable,
        host_tool(package, 'test.py'), config,
        osp.join(killed, last), '--work-dir',
        str(tmp_path / 'test')
    ], probe_env(env), repo_root)
    assert metric in log


@pytest.mark.timeout(900)
def test_classification_under_mmpretrain_train_py(tmp_path, repo_root,
                                                  subprocess_env):
    data = tiny_imagenet(str(tmp_path / 'imagenet'))
    config = write_tiny_cls_config(
        str(tmp_path / 'tiny.py'),
        repo_root,
        data,
        iters=ITERS,
        batch_size=4,
        checkpoint_interval=EVERY)
    with open(config, 'a') as f:  # as shipped: the config fixes no seed
        f.write('randomness = dict(seed=None)\n'
                'test_dataloader = dict(batch_size=2, num_workers=0, '
                "sampler=dict(type='DefaultSampler', shuffle=False), "
                "dataset=dict(type='ImageNet', data_root=%r, split='val', "
                'pipeline=[dict(type="LoadImageFromFile"), dict(type='
                '"Resize", scale=(32, 32)), dict(type="PackInputs")]))\n'
                "test_evaluator = dict(type='Accuracy', topk=(1, ))\n"
                'test_cfg = dict()\n' % data)
    check_host_launcher(config, 'mmpretrain', tmp_path, repo_root,
                        subprocess_env, EVERY, STOP, ITERS,
                        f'iter_{ITERS}.pth', 'accuracy/top1')

    # SIGTERM: the runtime's PreemptionHook saves iteration 4 first
    stopped, stopped_losses = str(tmp_path / 'term'), str(tmp_path / 't.txt')
    with paused_run(
            command(host_tool('mmpretrain', 'train.py'), config, stopped),
            probe_env(subprocess_env, losses=stopped_losses, pause_at=STOP),
            repo_root, stopped_losses) as proc:
        os.kill(proc.pid, signal.SIGTERM)
        out, err = resume(proc, stopped_losses)
    assert proc.returncode == 128 + signal.SIGTERM, err[-3000:]
    assert read_checkpoint(osp.join(
        stopped, f'iter_{STOP}.pth'))['meta']['iter'] == STOP


@pytest.mark.timeout(600)
def test_segmentation_under_mmseg_train_py(tmp_path, repo_root,
                                           subprocess_env):
    data = generate('ade20k', str(tmp_path / 'ade'), 4, 2,
                    (64, 64))['data_root']
    config = write_tiny_config(
        osp.join(repo_root, 'configs/locat/upernet_locat-t_ade20k.py'),
        str(tmp_path / 'seg.py'),
        data,
        iters=4)
    with open(config, 'a') as f:
        f.write(PROBE_IMPORTS +
                'default_hooks = dict(checkpoint=dict(interval=2))\n')
    check_host_launcher(config, 'mmseg', tmp_path, repo_root, subprocess_env,
                        2, 3, 4, 'iter_4.pth', 'mIoU')


@pytest.mark.timeout(600)
def test_detection_under_mmdet_train_py(tmp_path, repo_root, subprocess_env):
    paths = generate('coco', str(tmp_path / 'coco'), 2, 2, (64, 64), seed=2)
    root = paths['data_root']
    val_ann = osp.join(root, paths['ov_val_ann_file'])
    with open(val_ann) as f:
        names, _ = names_from_annotations(json.load(f))
    emb = write_embeddings(tmp_path / 'emb.npy', names)
    config = write_tiny_ovd_config(
        tmp_path / 'det.py',
        osp.join(repo_root, 'configs/ovd/fvit_clip-b16_ov-coco.py'), root, emb,
        val_ann)
    with open(config, 'a') as f:  # one iteration an epoch
        f.write(PROBE_IMPORTS + 'train_cfg = dict(max_epochs=3)\n'
                'default_hooks = dict(checkpoint=dict(interval=1))\n')
    check_host_launcher(config, 'mmdet', tmp_path, repo_root, subprocess_env,
                        1, 2, 3, 'epoch_3.pth', 'coco/bbox_mAP')
