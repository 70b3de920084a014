"""slurm_train.sh / slurm_test.sh hand srun the right job (stub srun);
slurm_train.sh passes signals for the job on to its tasks."""
import os
import os.path as osp
import shlex
import signal
import stat
import subprocess
import time

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


def _slurm_command(repo_root, stub_env, task, *argv):
    """``tools/slurm_TASK.sh gpu_part my_job cfg.py ARGV`` with the stub
    srun: the python command it ran (the common srun options checked)."""
    script = osp.join(repo_root, 'tools', f'slurm_{task}.sh')
    subprocess.run(['bash', script, 'gpu_part', 'my_job', 'cfg.py', *argv],
                   env=stub_env,
                   check=True,
                   capture_output=True)
    args = _recorded(stub_env)
    _check_common(args)
    command = args[args.index('python'):]
    assert command[2].endswith(osp.join('tools', f'{task}.py'))
    return command


@pytest.mark.e2e
def test_slurm_train(repo_root, stub_env):
    command = _slurm_command(repo_root, stub_env, 'train', 'work/dir',
                             '--cfg-options', 'train_cfg.max_iters=10',
                             '--amp')
    assert command[3:] == [
        'cfg.py', '--work-dir=work/dir', '--launcher=slurm', '--cfg-options',
        'train_cfg.max_iters=10', '--amp'
    ], shlex.join(command)


@pytest.mark.e2e
def test_slurm_test(repo_root, stub_env):
    command = _slurm_command(repo_root, stub_env, 'test', 'epoch_1.pth',
                             '--out', 'res.pkl')
    assert command[3:] == [
        'cfg.py', 'epoch_1.pth', '--launcher=slurm', '--out', 'res.pkl'
    ]


# srun stand-in that runs until a signal: records which one, exits 128 + it
# (what srun reports when its tasks exit so), as train.py does
STUB_SRUN_WAITS = """#!/usr/bin/env bash
printf '%s\\n' "$@" > "$SRUN_RECORD"
trap 'echo USR1 >> "$SRUN_RECORD.signals"; exit 138' USR1
touch "$SRUN_RECORD.ready"
sleep 60 &
wait
"""


@pytest.mark.e2e
def test_slurm_train_forwards_usr1_to_its_tasks(repo_root, stub_env, tmp_path):
    """sbatch --signal=B:USR1@T signals only the batch script; it must
    reach srun (which forwards it to every task), and the script must end
    with srun's status. (SIGTERM is not forwarded: srun would SIGKILL its
    tasks.)"""
    srun = tmp_path / 'bin' / 'srun'
    srun.write_text(STUB_SRUN_WAITS)
    record = stub_env['SRUN_RECORD']
    script = osp.join(repo_root, 'tools', 'slurm_train.sh')
    proc = subprocess.Popen(
        ['bash', script, 'gpu_part', 'my_job', 'cfg.py', 'work', '--resume'],
        env=stub_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 30
        while not osp.exists(record + '.ready'):
            assert proc.poll() is None and time.time() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGUSR1)
        assert proc.wait(timeout=30) == 138
    finally:
        if proc.poll() is None:
            proc.kill()
    with open(record + '.signals') as f:
        assert f.read().split() == ['USR1']
    args = _recorded(stub_env)
    assert args[-2:] == ['--launcher=slurm', '--resume']


def test_slurm_train_documents_preemption(repo_root):
    with open(osp.join(repo_root, 'tools', 'slurm_train.sh')) as f:
        header = f.read().split('\nif ')[0]
    for needed in ('SRUN_ARGS="--signal=USR1@120"', '--requeue',
                   '--signal=B:USR1@120', 'scontrol requeue', '--resume',
                   'status 143', 'exit 138', 'KillWait',
                   'SIGTERM is not forwarded'):
        assert needed in header, needed
