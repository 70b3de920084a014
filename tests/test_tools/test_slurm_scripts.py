"""slurm_train.sh / slurm_test.sh hand srun the right job (stub srun)."""
import os
import os.path as osp
import shlex
import stat
import subprocess

import pytest

STUB_SRUN = """#!/usr/bin/env bash
printf '%s\\n' "$@" > "$SRUN_RECORD"
"""


@pytest.fixture
def stub_env(tmp_path, subprocess_env):
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    srun = bin_dir / 'srun'
    srun.write_text(STUB_SRUN)
    srun.chmod(srun.stat().st_mode | stat.S_IEXEC)
    env = dict(subprocess_env)
    env['PATH'] = f'{bin_dir}{os.pathsep}{env["PATH"]}'
    env['SRUN_RECORD'] = str(tmp_path / 'srun_args.txt')
    env.update(
        GPUS='16',
        GPUS_PER_NODE='8',
        CPUS_PER_TASK='3',
        SRUN_ARGS='--qos=high --time=1:00:00')
    return env


def _recorded(env) -> list:
    with open(env['SRUN_RECORD']) as f:
        return f.read().splitlines()


def _check_common(args: list) -> None:
    for expected in ('-p', 'gpu_part', '--job-name=my_job', '--gres=gpu:8',
                     '--ntasks=16', '--ntasks-per-node=8', '--cpus-per-task=3',
                     '--kill-on-bad-exit=1', '--qos=high', '--time=1:00:00',
                     'python', '-u'):
        assert expected in args, (expected, args)
    # srun options come before the command it launches
    assert args.index('--qos=high') < args.index('python')


def test_slurm_train(repo_root, stub_env):
    script = osp.join(repo_root, 'tools', 'slurm_train.sh')
    subprocess.run([
        'bash', script, 'gpu_part', 'my_job', 'cfg.py', 'work/dir',
        '--cfg-options', 'train_cfg.max_iters=10', '--amp'
    ],
                   env=stub_env,
                   check=True,
                   capture_output=True)
    args = _recorded(stub_env)
    _check_common(args)
    command = args[args.index('python'):]
    assert command[2].endswith(osp.join('tools', 'train.py'))
    assert command[3:] == [
        'cfg.py', '--work-dir=work/dir', '--launcher=slurm', '--cfg-options',
        'train_cfg.max_iters=10', '--amp'
    ], shlex.join(command)


def test_slurm_test(repo_root, stub_env):
    script = osp.join(repo_root, 'tools', 'slurm_test.sh')
    subprocess.run([
        'bash', script, 'gpu_part', 'my_job', 'cfg.py', 'epoch_1.pth', '--out',
        'res.pkl'
    ],
                   env=stub_env,
                   check=True,
                   capture_output=True)
    args = _recorded(stub_env)
    _check_common(args)
    command = args[args.index('python'):]
    assert command[2].endswith(osp.join('tools', 'test.py'))
    assert command[3:] == [
        'cfg.py', 'epoch_1.pth', '--launcher=slurm', '--out', 'res.pkl'
    ]
