import os
import os.path as osp
import sys

import pytest

REPO_ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


@pytest.fixture(scope='session')
def repo_root() -> str:
    return REPO_ROOT


@pytest.fixture(scope='session')
def subprocess_env() -> dict:
    """Environment for tool subprocesses: venv first on PATH, 1 thread."""
    env = dict(os.environ)
    env['PATH'] = osp.dirname(sys.executable) + os.pathsep + env['PATH']
    env['PYTHONPATH'] = REPO_ROOT + os.pathsep + env.get('PYTHONPATH', '')
    env.setdefault('OMP_NUM_THREADS', '1')
    env['MKL_NUM_THREADS'] = env['OMP_NUM_THREADS']
    return env
