"""What the package, configs and tools need is committed, not ignored.

A file that .gitignore matches exists in the developer's tree but not in a
clean checkout or the wheel built from it (``mmlocat/datasets/data`` once
fell under the ``data/`` rule). Caught here, before CI.
"""
import os.path as osp
import shutil
import subprocess

import pytest

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))
BUILD_LEFTOVERS = ('__pycache__', '.pyc', '.egg-info')


def test_no_file_of_the_package_configs_or_tools_is_ignored():
    if shutil.which('git') is None or not osp.isdir(osp.join(REPO, '.git')) \
            and not osp.isfile(osp.join(REPO, '.git')):
        pytest.skip('not a git checkout')
    proc = subprocess.run([
        'git', 'ls-files', '--others', '--ignored', '--exclude-standard', '--',
        'mmlocat', 'configs', 'tools', 'requirements'
    ],
                          cwd=REPO,
                          capture_output=True,
                          text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    ignored = [
        p for p in proc.stdout.splitlines()
        if not any(part in p for part in BUILD_LEFTOVERS)
    ]
    assert ignored == [], ('ignored by .gitignore, so missing from a clean '
                           f'checkout: {ignored[:20]}')
