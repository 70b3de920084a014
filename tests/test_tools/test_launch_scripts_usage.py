"""dist_*.sh / slurm_*.sh print their usage and exit 2 on missing args."""
import pytest
from helpers.harness import run_tool

pytestmark = pytest.mark.e2e

SHELL = 'a launch script is a bash program'

CASES = {
    'dist_train.sh': (['cfg.py'], 'CONFIG GPUS'),
    'dist_test.sh': (['cfg.py', 'ckpt.pth'], 'CONFIG CHECKPOINT GPUS'),
    'slurm_train.sh': (['part', 'job',
                        'cfg.py'], 'PARTITION JOB_NAME CONFIG WORK_DIR'),
    'slurm_test.sh': (['part', 'job',
                       'cfg.py'], 'PARTITION JOB_NAME CONFIG CHECKPOINT'),
}


@pytest.mark.parametrize('script', sorted(CASES))
def test_missing_arguments_print_usage(script):
    args, usage = CASES[script]
    for given in (args, []):
        proc = run_tool(f'tools/{script}', *given, isolate=SHELL)
        assert proc.returncode == 2, proc.stderr
        assert f'usage: {script} {usage}' in proc.stderr
        assert f'expected at least {len(args) + 1} arguments, got ' \
            f'{len(given)}' in proc.stderr
        assert 'Unsupported' not in proc.stderr and proc.stdout == ''


@pytest.mark.parametrize('script,args', [
    ('dist_train.sh', ['cfg.py', 'x']),
    ('dist_train.sh', ['cfg.py', '0']),
    ('dist_test.sh', ['cfg.py', 'ckpt.pth', '']),
])
def test_gpus_must_be_a_positive_number(script, args):
    proc = run_tool(f'tools/{script}', *args, isolate=SHELL)
    assert proc.returncode == 2
    assert 'GPUS must be a positive number of processes' in proc.stderr
