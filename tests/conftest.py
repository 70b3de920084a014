import os
import os.path as osp
import sys

import pytest

REPO_ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))

# Where the tools write by default, relative to the repository: a test's
# files go under its tmp_path (a tool run gets --work-dir there); under
# several pytest processes two tests writing here would collide.
TOOL_OUTPUT_DIRS = ('work_dirs', 'data')
_TOOL_OUTPUTS = pytest.StashKey()


def _tool_outputs() -> set:
    found = set()
    for folder in TOOL_OUTPUT_DIRS:
        if osp.isdir(osp.join(REPO_ROOT, folder)):
            found.update(
                osp.join(folder, name)
                for name in os.listdir(osp.join(REPO_ROOT, folder)))
    return found


def pytest_sessionstart(session):
    if not hasattr(session.config, 'workerinput'):  # the run, not a worker
        session.config.stash[_TOOL_OUTPUTS] = _tool_outputs()


def pytest_sessionfinish(session, exitstatus):
    """A run whose tests wrote into the repository's tool folders fails,
    naming what they wrote."""
    before = session.config.stash.get(_TOOL_OUTPUTS, None)
    written = sorted(_tool_outputs() - before) if before is not None else []
    if written:
        print(
            f'\ntests wrote into the repository: {", ".join(written)} '
            '(a tool run without --work-dir / --out under tmp_path?)',
            file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_collection_finish(session):
    """Refuse a run that would fill the disk, before its first test: out of
    space, every later test fails with errors that do not say why."""
    worker = getattr(session.config, 'workerinput', {}).get('workerid')
    if worker not in (None, 'gw0') or not session.items:
        return  # one worker speaks for the run (a tool's own pytest too)
    from helpers.disk import short_of_space
    problem = short_of_space(session.config.option.basetemp, session.items)
    if problem:
        pytest.exit(problem, returncode=pytest.ExitCode.USAGE_ERROR)


@pytest.fixture(scope='session')
def repo_root() -> str:
    return REPO_ROOT


@pytest.fixture(scope='session')
def subprocess_env() -> dict:
    """Environment for a subprocess a test starts itself
    (``helpers.harness.tool_env``: venv first on PATH, this checkout on
    PYTHONPATH, 1 thread, no config formatting); prefer ``run_tool``."""
    from helpers.harness import tool_env
    return tool_env()


@pytest.fixture(scope='session')
def load_tool():
    """``load(path, name)``: a tool script of the repository (``tools/...``)
    imported as a module, to call its functions in the test process."""
    import importlib.util

    def load(path: str, name: str):
        spec = importlib.util.spec_from_file_location(
            name, osp.join(REPO_ROOT, path))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


@pytest.fixture
def make_ade20k(tmp_path):
    """``make(num_train, num_val, img_size)``: the data root of a fresh
    generated ADE20K set under the test's ``tmp_path`` (tests that plant
    faults change its files)."""

    def make(num_train: int = 4, num_val: int = 2, img_size=(32, 48)) -> str:
        from mmlocat.testing import generate
        return generate('ade20k', str(tmp_path / 'ade'), num_train, num_val,
                        img_size)['data_root']

    return make


def _scope_kept():
    """Restore mmengine's global default scopes to what they were."""
    from mmengine.registry import DefaultScope
    before = dict(DefaultScope._instance_dict)
    yield
    DefaultScope._instance_dict.clear()
    DefaultScope._instance_dict.update(before)


@pytest.fixture(autouse=True)
def isolate_text_cache(tmp_path_factory, monkeypatch):
    """Each test its own text-embedding cache (``MMLOCAT_CACHE``): a dump or
    a run-time vocabulary never reuses another test's (or the user's)
    embeddings; subprocesses inherit it."""
    monkeypatch.setenv('MMLOCAT_CACHE',
                       str(tmp_path_factory.mktemp('mmlocat_cache')))


@pytest.fixture(autouse=True)
def isolate_mmengine_instances():
    """Drop the mmengine loggers, message hubs and visualizers a test made
    (``helpers.harness.new_globals_dropped``)."""
    from helpers.harness import new_globals_dropped
    with new_globals_dropped():
        yield


@pytest.fixture(autouse=True)
def isolate_default_scope():
    """Undo ``init_default_scope`` calls of a test (mmengine keeps a global
    scope; a leaked 'mmpretrain' scope breaks later mmdet builds)."""
    yield from _scope_kept()


@pytest.fixture(autouse=True, scope='module')
def isolate_default_scope_per_module():
    """The same around a test module: its module-scoped fixtures run before
    the per-test snapshot above, so their scopes would leak otherwise."""
    yield from _scope_kept()


@pytest.fixture(autouse=True)
def isolate_signal_handlers():
    """Put SIGTERM / SIGUSR1 back after a test: a tool run in-process whose
    Runner is built but never run (a refused checkpoint) keeps the runtime's
    PreemptionHook handlers, which a real process would take with it when
    it exits."""
    import signal

    from mmlocat.engine.hooks import preemption_hook
    signals = (signal.SIGTERM, signal.SIGUSR1)
    before = {s: signal.getsignal(s) for s in signals}
    yield
    for signum, handler in before.items():
        if signal.getsignal(signum) != handler:
            signal.signal(signum, handler)
    preemption_hook._fork_policy.update(signals=(), previous={})


@pytest.fixture(autouse=True, scope='session')
def cached_pkg_config_lookups():
    """mmengine's ``pkg::name`` look-up, once per name for the session, in
    every ``Config.fromfile`` of the test process (a tool run in-process,
    a derived tiny config whose ``_base_`` is a shipped one): mmengine
    parses all ~60 metafiles of mmseg / mmdet on each look-up (also for
    each ``_base_``, where it fails and falls back to the base path),
    ~6 s of every such load on this CI's CPU. The installed packages'
    metafiles do not change during a session; a failed look-up raises the
    same error again. Likewise mmengine's ``is_installed(package)`` check
    before each look-up (it reloads ``pkg_resources``, ~0.1 s a call, 400
    calls to load the shipped configs): a package found once stays
    installed; one not found is asked again."""
    from unittest import mock

    from helpers.harness import EXTERNAL_CFG_PATH, cached_external_cfg_path
    from mmengine.utils import is_installed

    found = set()

    def installed(package: str) -> bool:
        if package not in found and is_installed(package):
            found.add(package)
        return package in found

    with mock.patch(EXTERNAL_CFG_PATH, cached_external_cfg_path), \
            mock.patch('mmengine.config.config.is_installed', installed):
        yield
