"""pre-commit runs the linters of ``make lint``, on the same paths."""
import os.path as osp
import re
import shlex

import yaml

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def _make_lint():
    with open(osp.join(REPO, 'Makefile')) as f:
        text = f.read()
    paths = re.search(r'^LINT_PATHS := (.+)$', text, re.M).group(1).split()
    body = re.search(r'^lint:.*\n((?:\t.+\n)+)', text, re.M).group(1)
    commands = [
        shlex.split(line.strip().replace('$(PY)', 'PY'))
        for line in body.splitlines()
    ]
    return paths, commands


def test_hooks_match_make_lint():
    paths, commands = _make_lint()
    with open(osp.join(REPO, '.pre-commit-config.yaml')) as f:
        config = yaml.safe_load(f)
    hooks = [h for repo in config['repos'] for h in repo['hooks']]
    entries = [shlex.split(h['entry']) for h in hooks]
    # `PY -m tool ARGS $(LINT_PATHS)` in make == `.venv/bin/python -m tool
    # ARGS` + the files in pre-commit (make's yapf adds --recursive for dirs)
    expected = [[
        a for a in c[1:] if a not in ('$(LINT_PATHS)', '--recursive')
    ] for c in commands]
    assert [e[0] for e in entries] == ['.venv/bin/python'] * len(entries)
    assert [e[1:] for e in entries] == expected
    files = re.compile(config['files'])
    for path in paths:
        sample = path if path.endswith('.py') else f'{path}/x/y.py'
        assert files.search(sample), path
    assert not files.search('.venv/lib/x.py')
