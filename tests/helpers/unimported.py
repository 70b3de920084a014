"""A pytest plugin: the modules of ``mmlocat/`` that a run never imported.

A coverage check without a coverage package (the pinned stack has none):
after the run, every ``mmlocat/**/*.py`` whose module is not in
``sys.modules`` of the test process is listed. Tools that tests launch in
a subprocess do not count, so run it on the fast tier, whose tests stay
in-process::

    PYTHONPATH=$PWD:$PWD/tests python -m pytest tests -q \\
        -m "not e2e and not env and not slow" -p helpers.unimported

A listed module is one no fast test imports (0 % covered by that tier).
"""
import os
import os.path as osp
import sys
from typing import List

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def package_modules(root: str = osp.join(REPO, 'mmlocat')) -> List[str]:
    """Dotted names of every ``.py`` file under ``root`` (no import)."""
    names = []
    for folder, _, files in os.walk(root):
        for name in files:
            if not name.endswith('.py'):
                continue
            rel = osp.relpath(osp.join(folder, name), osp.dirname(root))
            parts = rel[:-len('.py')].split(os.sep)
            if parts[-1] == '__init__':
                parts = parts[:-1]
            names.append('.'.join(parts))
    return sorted(names)


def pytest_terminal_summary(terminalreporter) -> None:
    missing = [n for n in package_modules() if n not in sys.modules]
    terminalreporter.write_sep('-', 'mmlocat modules this run never imported')
    terminalreporter.write_line(f'{len(missing)} of '
                                f'{len(package_modules())}:')
    for name in missing:
        terminalreporter.write_line(f'  {name}')
