"""tests/helpers/disk.py: a run short of disk is refused before its first
test, naming the space, the folder and the ways out."""
import os.path as osp

import pytest
from helpers.disk import (FULL_RUN_GB, LARGEST_TEST_GB, MIN_FREE_ENV,
                          needed_free_gb, short_of_space)
from helpers.harness import run_tool


class Item:
    """What the check reads of a collected test: its markers."""

    def __init__(self, *markers):
        self.markers = markers

    def get_closest_marker(self, name):
        return name if name in self.markers else None


def test_the_need_grows_with_the_heavy_tests(monkeypatch):
    monkeypatch.delenv(MIN_FREE_ENV, raising=False)
    assert needed_free_gb([Item(), Item()]) == LARGEST_TEST_GB
    assert needed_free_gb([Item('e2e'),
                           Item('slow'),
                           Item('slow',
                                'e2e')]) == pytest.approx(4 * LARGEST_TEST_GB)
    assert needed_free_gb([Item('e2e')] * 1000) == FULL_RUN_GB
    monkeypatch.setenv(MIN_FREE_ENV, '0')
    assert needed_free_gb([Item('e2e')] * 1000) == 0


def test_short_of_space_names_folder_need_and_ways_out(tmp_path, monkeypatch):
    missing = tmp_path / 'not' / 'yet'  # pytest makes it later
    monkeypatch.setenv(MIN_FREE_ENV, '0')
    assert short_of_space(str(missing), [Item('e2e')]) == ''
    monkeypatch.setenv(MIN_FREE_ENV, '1e9')
    problem = short_of_space(str(missing), [Item('e2e')] * 3)
    assert f'GB free under {tmp_path},' in problem
    assert 'these 3 tests need about 1000000000.0 GB' in problem
    assert '--basetemp' in problem and f'{MIN_FREE_ENV}=0' in problem


def test_a_session_short_of_space_runs_no_test(tmp_path):
    main = osp.join(osp.dirname(pytest.__file__), '__main__.py')
    done = run_tool(
        main,
        '-q',
        '-p',
        'no:cacheprovider',
        '--basetemp',
        str(tmp_path / 'base'),
        'tests/test_registry.py',
        isolate='a pytest session of its own, refused by the conftest hook',
        env={MIN_FREE_ENV: '1e9'})
    assert done.returncode == int(pytest.ExitCode.USAGE_ERROR), done.output
    assert 'need about 1000000000.0 GB' in done.output
    assert 'passed' not in done.output and 'PASSED' not in done.output
