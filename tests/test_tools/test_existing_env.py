"""mmlocat in an existing OpenMMLab environment, the ``custom_imports`` way.

A wheel of mmlocat (``pip wheel --no-deps .``) goes into a fresh virtual
environment layered on the project's one (``venv --system-site-packages``
sees only the base interpreter's packages, so a ``.pth`` file adds the
project venv's site-packages, less the project's own editable mmlocat:
torch, mmcv, mmengine and the hosts are there already). pip's plan for
the wheel and for ``pip install -e .`` installs mmlocat alone, and the
stack's versions and files are the same afterwards. Then, from a folder
outside the repository and without ``PYTHONPATH``, the hosts' *own
shipped* training scripts (``mmseg/.mim/tools/train.py``,
``mmdet/.mim/tools/train.py``) train user-style configs that inherit the
hosts' configs and swap in ``mmlocat.LocAtViT`` / ``mmlocat.LaStViT``, for
two iterations on generated data, then validate.
"""
import glob
import json
import os
import os.path as osp
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile

import pytest

from mmlocat.testing import generate

pytestmark = pytest.mark.env

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
STACK = ('torch', 'torchvision', 'mmcv', 'mmengine', 'mmsegmentation', 'mmdet',
         'mmpretrain', 'numpy', 'tqdm')
TINY_ARCH = ('dict(embed_dims=32, num_layers=4, num_heads=2, '
             'feedforward_channels=64)')

VERSIONS = """
import importlib.metadata as m, json, sys
names = sys.argv[1:]
print(json.dumps({n: [m.version(n), str(m.distribution(n).locate_file(''))]
                  for n in names}))
"""

# A user's config on top of mmseg's ViT + MLN + UperNet recipe.
SEG_CONFIG = """
_base_ = ['mmseg::vit/vit_deit-s16_mln_upernet_8xb2-160k_ade20k-512x512.py']
custom_imports = dict(imports=['mmlocat'], allow_failed_imports=False)
runner_type = 'mmlocat.MMLocatRunner'  # the documented runtime line
crop_size = (64, 64)
norm_cfg = dict(type='BN', requires_grad=True)  # one CPU process
model = dict(
    pretrained=None,
    data_preprocessor=dict(size=crop_size),
    backbone=dict(
        _delete_=True,
        type='mmlocat.LocAtViT',
        arch={arch},
        img_size=64,
        patch_size=16,
        out_type='featmap',
        out_indices=(0, 1, 2, 3)),
    neck=dict(in_channels=[32] * 4, out_channels=32),
    decode_head=dict(in_channels=[32] * 4, channels=16, norm_cfg=norm_cfg),
    auxiliary_head=dict(in_channels=32, channels=16, norm_cfg=norm_cfg))
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomCrop', crop_size=crop_size),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(
    batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(data_root={root!r}, pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1, num_workers=0, persistent_workers=False,
    dataset=dict(data_root={root!r}, pipeline=test_pipeline))
test_dataloader = val_dataloader
train_cfg = dict(type='IterBasedTrainLoop', max_iters=2, val_interval=2)
default_hooks = dict(logger=dict(interval=1),
                     checkpoint=dict(interval=2, by_epoch=False))
"""

# ViTDet-style Mask R-CNN: plain ViT -> simple pyramid -> FPN, on mmdet's
# own Mask R-CNN recipe.
DET_CONFIG = """
_base_ = ['mmdet::mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py']
custom_imports = dict(imports=['mmlocat'], allow_failed_imports=False)
norm_cfg = dict(type='BN', requires_grad=True)
model = dict(
    backbone=dict(
        _delete_=True,
        type='mmlocat.LaStViT',
        arch={arch},
        img_size=64,
        patch_size=16,
        out_type='featmap',
        out_indices=(3, )),
    neck=[
        dict(type='mmlocat.PatchScoreNeck', in_channels=32,
             scales=(4, 2, 1, 0.5), modulate=False, pooling='gap',
             norm_cfg=norm_cfg),
        dict(type='FPN', in_channels=[32] * 4, out_channels=32, num_outs=5),
    ],
    rpn_head=dict(in_channels=32, feat_channels=32),
    roi_head=dict(
        bbox_roi_extractor=dict(out_channels=32),
        bbox_head=dict(in_channels=32, fc_out_channels=32),
        mask_roi_extractor=dict(out_channels=32),
        mask_head=dict(in_channels=32, conv_out_channels=32)),
    # an untrained net scores low: keep every box so the metric has input
    test_cfg=dict(rcnn=dict(score_thr=0.0)))
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='Resize', scale=(96, 64), keep_ratio=True),
    dict(type='PackDetInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(96, 64), keep_ratio=True),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='PackDetInputs',
         meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape',
                    'scale_factor')),
]
train_dataloader = dict(
    batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(data_root={root!r}, ann_file={train_ann!r},
                 data_prefix=dict(img={train_img!r}),
                 pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1, num_workers=0, persistent_workers=False,
    dataset=dict(data_root={root!r}, ann_file={val_ann!r},
                 data_prefix=dict(img={val_img!r}),
                 pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(ann_file={root!r} + '/' + {val_ann!r})
test_evaluator = val_evaluator
train_cfg = dict(_delete_=True, type='IterBasedTrainLoop', max_iters=2,
                 val_interval=2)
param_scheduler = []
default_hooks = dict(logger=dict(interval=1),
                     checkpoint=dict(interval=2, by_epoch=False))
log_processor = dict(by_epoch=False)
"""


def run(cmd, **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=300, **kwargs)
    assert proc.returncode == 0, (' '.join(cmd), proc.stdout[-3000:],
                                  proc.stderr[-5000:])
    return proc


class UserEnv:
    """The layered venv, its interpreter and a clean environment."""

    def __init__(self, root: str):
        self.root = root
        self.venv = osp.join(root, 'user-venv')
        self.python = osp.join(self.venv, 'bin', 'python')
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ('PYTHONPATH', 'VIRTUAL_ENV', 'PYTHONHOME')
        }
        env['PATH'] = osp.join(self.venv, 'bin') + os.pathsep + env['PATH']
        env.setdefault('OMP_NUM_THREADS', '1')
        env.setdefault('MMLOCAT_FORMAT_CONFIG', '0')
        self.env = env
        self.cwd = osp.join(root, 'user-project')  # outside the repository
        os.makedirs(self.cwd, exist_ok=True)

    def py(self, *args, **kwargs) -> subprocess.CompletedProcess:
        return run([self.python, *args], cwd=self.cwd, env=self.env, **kwargs)

    def pip(self, *args) -> subprocess.CompletedProcess:
        # no index: nothing may be fetched, so nothing of the stack can be
        # replaced behind the test's back
        return self.py('-m', 'pip', '--disable-pip-version-check', *args,
                       '--no-index')

    def versions(self) -> dict:
        return json.loads(self.py('-c', VERSIONS, *STACK).stdout)


@pytest.fixture(scope='module')
def user_env(tmp_path_factory):
    root = str(tmp_path_factory.mktemp('existing_env'))
    dist = osp.join(root, 'dist')
    # a clean copy of the source tree: setuptools builds in the tree, and a
    # stale build/ folder must not leak old files into the wheel
    source = osp.join(root, 'source')
    skip = shutil.ignore_patterns('.git', '.venv', 'build', 'dist',
                                  '*.egg-info', '__pycache__', 'work_dirs')

    def ignore(folder, names):
        # the repository's generated data/ folder, not package data such as
        # mmlocat/testing/data
        top = {'data'} & set(names) if osp.samefile(folder, REPO) else set()
        return skip(folder, names) | top

    shutil.copytree(REPO, source, ignore=ignore)
    run([
        sys.executable, '-m', 'pip', '--disable-pip-version-check', 'wheel',
        '--no-deps', '--no-build-isolation', '--no-index', '-w', dist, source
    ],
        cwd=root)
    env = UserEnv(root)
    run([
        sys.executable, '-m', 'venv', '--system-site-packages',
        '--without-pip', env.venv
    ])
    purelib = env.py(
        '-c', 'import sysconfig; '
        "print(sysconfig.get_paths()['purelib'])").stdout.strip()
    # the project venv's packages minus its own (editable) mmlocat
    stack = osp.join(root, 'stack-site-packages')
    os.makedirs(stack)
    project = sysconfig.get_paths()['purelib']
    for name in os.listdir(project):
        if 'mmlocat' not in name:
            os.symlink(osp.join(project, name), osp.join(stack, name))
    with open(osp.join(purelib, 'project_venv.pth'), 'w') as f:
        f.write(stack + '\n')
    env.stack = stack
    env.wheel, = glob.glob(osp.join(dist, 'mmlocat-*.whl'))
    env.purelib = purelib
    env.before = env.versions()
    plan = osp.join(root, 'plan.json')
    env.pip('install', '--dry-run', '--report', plan, '--find-links', dist,
            'mmlocat')
    with open(plan) as f:
        env.wheel_plan = [
            i['metadata']['name'] for i in json.load(f)['install']
        ]
    env.pip('install', '--dry-run', '--report', plan, '--no-build-isolation',
            '-e', REPO)
    with open(plan) as f:
        env.editable_plan = [
            i['metadata']['name'] for i in json.load(f)['install']
        ]
    env.pip('install', '--find-links', dist, 'mmlocat')
    return env


def test_wheel_changes_nothing_of_the_stack(user_env):
    assert user_env.wheel_plan == ['mmlocat']
    assert user_env.editable_plan == ['mmlocat']
    after = user_env.versions()
    assert after == user_env.before
    # the stack is the project's, not a copy in the user venv
    for name, (_, location) in after.items():
        assert location.startswith(user_env.stack), (name, location)
    origin = user_env.py('-c', 'import mmlocat; print(mmlocat.__file__)')
    assert origin.stdout.strip().startswith(user_env.purelib)


def test_wheel_ships_the_package_only(user_env):
    with zipfile.ZipFile(user_env.wheel) as wheel:
        names = wheel.namelist()
    tops = {n.split('/')[0] for n in names}
    version = re.search(r'mmlocat-([^-]+)-', user_env.wheel).group(1)
    assert tops == {'mmlocat', f'mmlocat-{version}.dist-info'}, tops
    assert f'mmlocat-{version}.dist-info/licenses/LICENSE' in names or (
        f'mmlocat-{version}.dist-info/LICENSE' in names)
    # what a user needs: every module and data file of the package
    sources = {
        osp.relpath(p, REPO)
        for p in glob.glob(
            osp.join(REPO, 'mmlocat', '**', '*'), recursive=True)
        if osp.isfile(p) and '__pycache__' not in p
    }
    assert sources <= set(names), sorted(sources - set(names))


# every module of the installed wheel imports, and the package data the
# library reads at run time is there (outside the checkout, no PYTHONPATH)
WHEEL_MODULES = r"""
import importlib, json, os, pkgutil, tempfile
import mmlocat
failed = {}
names = [m.name for m in pkgutil.walk_packages(mmlocat.__path__, 'mmlocat.')]
for name in names:
    try:
        importlib.import_module(name)
    except Exception as err:
        failed[name] = f'{type(err).__name__}: {err}'
from mmlocat.text.class_names import imagenet_class_names
from mmlocat.testing import generate
lvis = generate('lvis', tempfile.mkdtemp(dir=os.getcwd()), num_train=1,
                num_val=1, img_size=(32, 32))
print(json.dumps(dict(
    origin=mmlocat.__file__, modules=len(names), failed=failed,
    imagenet=len(imagenet_class_names('open_clip')),
    lvis=sorted(lvis))))
"""


def test_every_module_imports_from_the_wheel(user_env):
    out = json.loads(
        user_env.py('-c', WHEEL_MODULES).stdout.strip().splitlines()[-1])
    assert out['origin'].startswith(user_env.purelib), out['origin']
    # one module (or sub-package) per .py file of the source tree, less
    # mmlocat/__init__.py (walk_packages names what is below mmlocat)
    expected = glob.glob(
        osp.join(REPO, 'mmlocat', '**', '*.py'), recursive=True)
    assert out['modules'] == len(expected) - 1
    assert out['failed'] == {}
    assert out['imagenet'] == 1000  # mmlocat/datasets/data ships
    assert out['lvis']  # the LVIS writer's category list ships


def _host_train_script(user_env, package: str) -> str:
    proc = user_env.py(
        '-c', f'import os, {package}; '
        f'print(os.path.dirname({package}.__file__))')
    script = osp.join(proc.stdout.strip(), '.mim', 'tools', 'train.py')
    assert osp.isfile(script), script
    return script


def _train(user_env, package: str, config_text: str, name: str) -> str:
    config = osp.join(user_env.cwd, f'{name}.py')
    with open(config, 'w') as f:
        f.write(config_text)
    work_dir = osp.join(user_env.cwd, 'work_dirs', name)
    proc = user_env.py(
        _host_train_script(user_env, package), config, '--work-dir', work_dir)
    log = proc.stdout + proc.stderr
    assert osp.isfile(osp.join(work_dir, 'iter_2.pth')), log[-3000:]
    return log


def _data(user_env, kind: str, img_size) -> dict:
    return generate(
        kind,
        osp.join(user_env.root, kind),
        num_train=4,
        num_val=2,
        img_size=img_size)


def _check_log(log: str, backbone: str) -> None:
    assert f"type='{backbone}'" in log  # the config the host logged
    assert re.search(r'Iter\(train\) \[2/2\]', log), log[-3000:]


@pytest.mark.timeout(300)
def test_mmseg_shipped_train_script_with_locatvit(user_env):
    data = _data(user_env, 'ade20k', (64, 64))
    log = _train(user_env, 'mmseg',
                 SEG_CONFIG.format(arch=TINY_ARCH, root=data['data_root']),
                 'upernet_locat-tiny_user')
    _check_log(log, 'mmlocat.LocAtViT')
    assert re.search(r'mIoU: [0-9.]+', log), log[-3000:]
    # the runtime line alone gives mmseg's own train.py mmlocat's runtime
    for name in ('RNGStateHook', 'PreemptionHook',
                 'WeightsOnlyCheckpointHook'):
        assert f'mmlocat runtime: custom_hooks += mmlocat.{name}' in log


@pytest.mark.timeout(300)
def test_mmdet_shipped_train_script_with_lastvit(user_env):
    data = _data(user_env, 'coco', (64, 96))
    text = DET_CONFIG.format(
        arch=TINY_ARCH,
        root=data['data_root'],
        train_ann=data['train_ann_file'],
        train_img=data['train_img_dir'],
        val_ann=data['val_ann_file'],
        val_img=data['val_img_dir'])
    log = _train(user_env, 'mmdet', text, 'mask-rcnn_last-tiny_user')
    _check_log(log, 'mmlocat.LaStViT')
    assert re.search(r'coco/bbox_mAP: [0-9.-]+', log), log[-3000:]
    assert re.search(r'coco/segm_mAP: [0-9.-]+', log), log[-3000:]
