"""Fixtures of the README tests (see readme_runner.py, placeholders.py).

Each test that runs README commands is checked when it ends: every command
the README markers assign to it must have run (``readme_runner.EXECUTED``);
a test that passes without running them fails here.
"""
import os.path as osp
import sys

import pytest

HERE = osp.dirname(osp.abspath(__file__))
TESTS = osp.dirname(HERE)
for path in (osp.join(TESTS, 'test_configs'), TESTS):
    if path not in sys.path:
        sys.path.insert(0, path)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f'readme_{report.when}', report)


@pytest.fixture(autouse=True)
def readme_commands_ran(request):
    """After a passing test: the commands its markers name all ran."""
    yield
    report = getattr(request.node, 'readme_call', None)
    if report is None or not report.passed:
        return
    from readme_blocks import blocks_of_test
    from readme_runner import executed_by
    test = request.node.nodeid
    ran = executed_by(test)
    missing = []
    for block, numbers in blocks_of_test(test):
        not_run = [
            n for n in numbers if (block.file, block.index, n) not in ran
        ]
        if not_run:
            missing.append(f'{block.name}: commands {not_run}')
    assert not missing, (f'{test} passed without running the README commands'
                         f' its markers assign to it: {missing}')


@pytest.fixture(scope='module', autouse=True)
def tiny_open_clip_models(tmp_path_factory):
    """The open_clip names the READMEs use, as tiny models (tiny_models)."""
    from tiny_models import tiny_open_clip
    with tiny_open_clip(str(tmp_path_factory.mktemp('open_clip'))) as cfgs:
        yield cfgs


@pytest.fixture(scope='session')
def readme_data(tmp_path_factory):
    """A folder holding ``data/``: the tiny datasets in the configs'
    layouts (placeholders.make_data), copied into every user root."""
    from placeholders import make_data
    folder = tmp_path_factory.mktemp('readme_data')
    make_data(str(folder), str(tmp_path_factory.mktemp('readme_scratch')))
    return str(folder)


@pytest.fixture
def new_root(tmp_path_factory, readme_data):
    """``new_root()``: a fresh user root (placeholders.UserRoot)."""
    from placeholders import UserRoot

    def make():
        return UserRoot(str(tmp_path_factory.mktemp('user')), readme_data)

    return make


@pytest.fixture(scope='module')
def module_root(tmp_path_factory, readme_data, tiny_open_clip_models):
    """A user root shared by the tests of a module (their commands follow
    each other as in the README)."""
    from placeholders import UserRoot
    return UserRoot(str(tmp_path_factory.mktemp('user')), readme_data)
