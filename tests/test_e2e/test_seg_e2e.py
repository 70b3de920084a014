"""End to end: every segmentation config family through the user's tools.

Each family (UperNet LocAtViT, its plain-ViT twin, the LocAtViT probe, the
ViT probe, UperNet LaSt-ViT, its plain-ViT twin) trains for two iterations
with ``tools/train.py`` on generated ADE20K / COCO-Stuff / PASCAL Context
data and validates (mIoU) at the end; each dataset is used at least once.
The shipped configs are shrunk only through derived configs written by
:mod:`helpers.shrink`. The UperNet LocAtViT run is then reused to resume from
its checkpoint, to test with ``tools/test.py`` in sliding-window mode
(``--out``, ``--show-dir``), and a fresh copy trains with two processes
through ``tools/dist_train.sh``. The runs go through the harness
(``run_tool``, in this process; the 2-process run is its own process,
started first and running meanwhile); they are shared between the tests
by module-scoped fixtures.
"""
import os
import os.path as osp
import pickle
import re
import shutil
import socket
import subprocess
from typing import Dict, List, NamedTuple

import pytest
import torch
from helpers.harness import run_tool, start_tool
from helpers.shrink import write_tiny_config

from mmlocat.testing import generate

pytestmark = pytest.mark.e2e

IMG_HW = (64, 96)  # generated images (H, W); crops are 64 x 64
ITERS = 2
# family -> (shipped config, generated dataset kind)
FAMILIES = {
    'upernet_locat': ('configs/locat/upernet_locat-b_ade20k.py', 'ade20k'),
    'upernet_vit':
    ('configs/locat/upernet_vit-t_pascal-context-59.py', 'pascal_context'),
    'probe_locat':
    ('configs/locat/probe_locat-t_coco-stuff164k.py', 'coco_stuff'),
    'probe_vit': ('configs/locat/probe_vit-b_ade20k.py', 'ade20k'),
    'upernet_last':
    ('configs/last/upernet_last-b_coco-stuff164k.py', 'coco_stuff'),
    'upernet_last_twin':
    ('configs/last/upernet_vit-b_pascal-context-59.py', 'pascal_context'),
}
TIMEOUT = 600


class Run(NamedTuple):
    returncode: int
    log: str
    work_dir: str


def run_jobs(jobs: List[dict]) -> List[Run]:
    """Run ``jobs`` (``cmd``: the tool and its arguments, ``work_dir``,
    optional ``env`` and ``isolate``): the isolated ones are started first
    (:func:`start_tool`) and run while the others run in this process, one
    after the other (:func:`run_tool`); each one's stdout and stderr also
    go to ``work_dir/console.txt``."""
    started = {}
    for index, job in enumerate(jobs):
        os.makedirs(job['work_dir'], exist_ok=True)
        if job.get('isolate'):
            console = open(osp.join(job['work_dir'], 'console.txt'), 'w')
            started[index] = (start_tool(
                *job['cmd'],
                env=job.get('env'),
                isolate=job['isolate'],
                stdout=console,
                stderr=subprocess.STDOUT), console)
    results = []
    for index, job in enumerate(jobs):
        if index in started:
            proc, console = started[index]
            try:
                proc.wait(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            console.close()
            with open(console.name) as f:
                log = f.read()
            results.append(Run(proc.returncode, log, job['work_dir']))
            continue
        done = run_tool(*job['cmd'], env=job.get('env'))
        with open(osp.join(job['work_dir'], 'console.txt'), 'w') as f:
            f.write(done.output)
        results.append(Run(done.returncode, done.output, job['work_dir']))
    return results


def check(run: Run) -> str:
    assert run.returncode == 0, run.log[-4000:]
    return run.log


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


@pytest.fixture(scope='module')
def data_roots(tmp_path_factory) -> Dict[str, str]:
    root = tmp_path_factory.mktemp('seg_data')
    return {
        kind:
        generate(
            kind,
            str(root / kind),
            num_train=4,
            num_val=2,
            img_size=IMG_HW,
            seed=0)['data_root']
        for kind in ('ade20k', 'coco_stuff', 'pascal_context')
    }


@pytest.fixture(scope='module')
def configs(tmp_path_factory, data_roots, repo_root) -> Dict[str, str]:
    root = tmp_path_factory.mktemp('seg_configs')
    # probes keep both checkpoints to show the backbone did not move
    every_iter = dict(default_hooks=dict(checkpoint=dict(interval=1)))
    return {
        family:
        write_tiny_config(
            osp.join(repo_root, shipped),
            str(root / f'{family}.py'),
            data_roots[kind],
            ITERS,
            extra=every_iter if family.startswith('probe') else None)
        for family, (shipped, kind) in FAMILIES.items()
    }


@pytest.fixture(scope='module')
def trained(tmp_path_factory, configs) -> Dict[str, Run]:
    root = tmp_path_factory.mktemp('seg_train')
    jobs = [
        dict(
            cmd=[
                'tools/train.py', configs[family], '--work-dir',
                str(root / family)
            ],
            work_dir=str(root / family)) for family in FAMILIES
    ]
    return dict(zip(FAMILIES, run_jobs(jobs)))


@pytest.fixture(scope='module')
def followups(tmp_path_factory, configs, trained) -> Dict[str, Run]:
    """Resume, slide-window test and a 2-process run of UperNet LocAtViT;
    test and resume of the LocAtViT probe."""
    check(trained['upernet_locat'])
    check(trained['probe_locat'])
    root = tmp_path_factory.mktemp('seg_followups')
    cfg = configs['upernet_locat']
    ckpt = osp.join(trained['upernet_locat'].work_dir, f'iter_{ITERS}.pth')
    resume_dir = str(root / 'resume')
    shutil.copytree(trained['upernet_locat'].work_dir, resume_dir)
    os.remove(osp.join(resume_dir, 'console.txt'))
    test_dir = str(root / 'test')
    # the probes' OneCycle schedule keeps a function in its state: their
    # checkpoints must still resume and test under weights-only loading
    probe = trained['probe_locat']
    probe_resume_dir = str(root / 'probe_resume')
    shutil.copytree(probe.work_dir, probe_resume_dir)
    os.remove(osp.join(probe_resume_dir, 'console.txt'))
    jobs = dict(
        probe_test=dict(
            cmd=[
                'tools/test.py', configs['probe_locat'],
                osp.join(probe.work_dir, f'iter_{ITERS}.pth'), '--work-dir',
                str(root / 'probe_test')
            ],
            work_dir=str(root / 'probe_test')),
        probe_resume=dict(
            cmd=[
                'tools/train.py', configs['probe_locat'], '--work-dir',
                probe_resume_dir, '--resume', '--cfg-options',
                f'train_cfg.max_iters={ITERS + 1}',
                f'train_cfg.val_interval={ITERS + 1}'
            ],
            work_dir=probe_resume_dir),
        dist=dict(
            cmd=[
                'tools/dist_train.sh', cfg, '2', '--work-dir',
                str(root / 'dist')
            ],
            work_dir=str(root / 'dist'),
            env=dict(PORT=str(free_port())),
            isolate='2 gloo processes under torchrun'),
        resume=dict(
            cmd=[
                'tools/train.py', cfg, '--work-dir', resume_dir, '--resume',
                '--cfg-options', f'train_cfg.max_iters={ITERS + 1}',
                f'train_cfg.val_interval={ITERS + 1}'
            ],
            work_dir=resume_dir),
        test=dict(
            cmd=[
                'tools/test.py',
                cfg,
                ckpt,
                '--work-dir',
                test_dir,
                '--out',
                osp.join(test_dir, 'preds.pkl'),
                '--show-dir',
                osp.join(test_dir, 'show'),
                '--cfg-options',
                'model.test_cfg.mode=slide',
                'model.test_cfg.crop_size=(48,48)',
                'model.test_cfg.stride=(32,32)',
                # mmseg's hook draws every 50th image by default
                'default_hooks.visualization.interval=1'
            ],
            work_dir=test_dir),
    )
    return dict(zip(jobs, run_jobs(list(jobs.values()))))


def load_state_dict(path: str) -> dict:
    return torch.load(
        path, map_location='cpu', weights_only=False)['state_dict']


@pytest.mark.parametrize('family', list(FAMILIES))
@pytest.mark.slow
def test_family_trains_and_validates(family, trained):
    run = trained[family]
    log = check(run)
    assert f'Iter(train) [{ITERS}/{ITERS}]' in log
    val = re.search(r'Iter\(val\) \[\d+/\d+\].*mIoU: [\d.]+', log)
    assert val, log[-2000:]
    ckpt = osp.join(run.work_dir, f'iter_{ITERS}.pth')
    assert osp.isfile(ckpt)
    keys = load_state_dict(ckpt).keys()
    gaug = any('attn.gaug.' in k for k in keys)
    assert gaug == (family in ('upernet_locat', 'probe_locat'))
    if family.startswith('probe'):
        assert 'decode_head.proj.gn.weight' in keys
        assert not any(k.startswith('auxiliary_head.') for k in keys)
    if family.startswith('upernet_last'):
        assert 'neck.gamma' in keys  # PatchScoreNeck replaced the MLN
    else:
        assert 'neck.gamma' not in keys


@pytest.mark.parametrize('family', ['probe_locat', 'probe_vit'])
def test_probe_backbone_stays_frozen(family, trained):
    """Between the checkpoints of iterations 1 and 2 the probe head moved
    and the frozen backbone did not."""
    work_dir = trained[family].work_dir
    first, second = (
        load_state_dict(osp.join(work_dir, f'iter_{i}.pth')) for i in (1, 2))
    backbone = [k for k in first if k.startswith('backbone.')]
    assert backbone and all(torch.equal(first[k], second[k]) for k in backbone)
    head = [k for k in first if k.startswith('decode_head.')]
    assert any(not torch.equal(first[k], second[k]) for k in head)


@pytest.mark.slow
def test_resume_continues(followups):
    log = check(followups['resume'])
    assert 'Auto resumed from the latest checkpoint' in log
    assert f'resumed epoch: 0, iter: {ITERS}' in log
    assert f'Iter(train) [{ITERS + 1}/{ITERS + 1}]' in log
    assert f'Iter(train) [1/{ITERS + 1}]' not in log
    assert osp.isfile(
        osp.join(followups['resume'].work_dir, f'iter_{ITERS + 1}.pth'))


def test_probe_checkpoint_tests_and_resumes(followups):
    """OneCycle's annealing function is stored by name (the probe schedule's
    mmlocat.WeightsOnlyCheckpointHook), so weights-only loading reads the
    probe's checkpoints: tools/test.py evaluates one and --resume
    continues."""
    assert re.search(r'mIoU: [\d.]+', check(followups['probe_test']))
    log = check(followups['probe_resume'])
    assert f'resumed epoch: 0, iter: {ITERS}' in log
    assert f'Iter(train) [{ITERS + 1}/{ITERS + 1}]' in log


def test_slide_test_with_out_and_show_dir(followups):
    run = followups['test']
    log = check(run)
    assert re.search(r'mIoU: [\d.]+', log)
    with open(osp.join(run.work_dir, 'preds.pkl'), 'rb') as f:
        preds = pickle.load(f)
    assert len(preds) == 2  # the two validation images
    for pred in preds:
        assert tuple(pred['ori_shape']) == IMG_HW
        assert tuple(pred['pred_sem_seg']['data'].shape) == (1, *IMG_HW)
        assert tuple(pred['seg_logits']['data'].shape) == (150, *IMG_HW)
    pngs = [
        f for _, _, files in os.walk(osp.join(run.work_dir, 'show'))
        for f in files if f.endswith('.png')
    ]
    assert len(pngs) == 2


def test_two_process_training(followups):
    run = followups['dist']
    log = check(run)
    assert 'Distributed training: True' in log
    assert 'GPU number: 2' in log  # mmengine's name for the world size
    assert 'mmlocat.CPUDistributedDataParallel' in log
    assert osp.isfile(osp.join(run.work_dir, f'iter_{ITERS}.pth'))


@pytest.mark.parametrize('mode', ['slide', 'whole'])
def test_gaug_grid_follows_each_window(mode, configs):
    """In-process: each slide window runs GAug on its own patch grid."""
    from mmengine.config import Config
    from mmengine.registry import DefaultScope
    from mmseg.registry import MODELS
    cfg = Config.fromfile(configs['upernet_locat'])
    cfg.model.test_cfg = dict(mode=mode, crop_size=(48, 48), stride=(32, 32))
    with DefaultScope.overwrite_default_scope('mmseg'):
        model = MODELS.build(cfg.model).eval()
    grids = []
    for layer in model.backbone.layers:
        layer.attn.register_forward_pre_hook(
            lambda module, args: grids.append(tuple(args[1])))
    image = torch.rand(1, 3, *IMG_HW)
    meta = [dict(img_shape=IMG_HW, ori_shape=IMG_HW, pad_shape=IMG_HW)]
    with torch.no_grad():
        logits = model.inference(image, meta)
    assert logits.shape == (1, 150, *IMG_HW)
    assert torch.isfinite(logits).all()
    num_layers = len(model.backbone.layers)
    if mode == 'slide':
        # 2 x 3 windows of 48 x 48 over 64 x 96 -> 3 x 3 patches each
        assert grids == [(3, 3)] * (6 * num_layers)
    else:
        assert grids == [(4, 6)] * num_layers
