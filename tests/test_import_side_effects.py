"""Importing mmlocat changes nothing outside mmlocat (issue 27 item 7)."""
import json
import subprocess
import sys

# what a user imports: the package, every sub-package that registers, and
# the text side
PACKAGES = [
    'mmlocat', 'mmlocat.utils', 'mmlocat.engine', 'mmlocat.datasets',
    'mmlocat.evaluation', 'mmlocat.models', 'mmlocat.apis', 'mmlocat.text'
]

# 1) which modules of other packages importing mmlocat loads
LIST_SCRIPT = r'''
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps(sorted(
    n for n, m in sys.modules.items()
    if m is not None and n.split('.')[0] != 'mmlocat'
    and not n.startswith('__'))))
'''

# 2) load those first (their own import-time changes happen here), record
# every attribute of every loaded module of torch / numpy / mmengine and of
# the classes defined there, by identity; import mmlocat; compare
CHECK_SCRIPT = r'''
import importlib, inspect, json, sys
import torch.serialization
for name in json.loads(sys.stdin.read()):
    try:
        importlib.import_module(name)
    except Exception:
        pass  # private / platform modules; what loads, loads
HOSTS = ('mmengine', 'torch', 'numpy')


def snapshot():
    seen = {}
    for name, module in list(sys.modules.items()):
        if module is None or name.split('.')[0] not in HOSTS:
            continue
        try:
            attrs = dict(vars(module))
        except TypeError:
            continue
        seen[name] = {k: id(v) for k, v in attrs.items()}
        for k, v in attrs.items():
            if inspect.isclass(v) and getattr(v, '__module__', '') == name:
                seen[name + ':' + k] = {a: id(b) for a, b in vars(v).items()}
    return seen


import os
from mmengine.fileio.backends import registry_utils

# tables mutated in place (their identity stays): mmengine's file
# backends, and the interpreter's fork handlers (recorded as registered)
fork_handlers = []
register_at_fork = os.register_at_fork


def recording_register_at_fork(**handlers):
    fork_handlers.append(sorted(handlers))
    register_at_fork(**handlers)


os.register_at_fork = recording_register_at_fork


def backend_table():
    return ({k: id(v) for k, v in registry_utils.backends.items()},
            {k: id(v) for k, v in registry_utils.prefix_to_backends.items()})


safe = set(map(id, torch.serialization.get_safe_globals()))
backends = backend_table()
before = snapshot()
for name in sys.argv[1:]:
    importlib.import_module(name)
after = snapshot()
changed = [f'{name}.{key}' for name, attrs in before.items()
           for key, ident in attrs.items()
           if after.get(name, {}).get(key) != ident]
if set(map(id, torch.serialization.get_safe_globals())) != safe:
    changed.append('torch.serialization.get_safe_globals()')
if backend_table() != backends:
    changed.append('mmengine.fileio file backends')
if fork_handlers:
    changed.append(f'os.register_at_fork {fork_handlers}')
print('CHANGED ' + json.dumps(changed))
print('CHECKED ' + str(sum(len(a) for a in before.values())))
'''


def _run(script, stdin=''):
    proc = subprocess.run(
        [sys.executable, '-c', script] + PACKAGES,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_import_mmlocat_changes_no_attribute_of_torch_numpy_mmengine():
    modules = _run(LIST_SCRIPT).strip().splitlines()[-1]
    out = _run(CHECK_SCRIPT, stdin=modules)
    lines = dict(
        line.split(' ', 1) for line in out.splitlines()
        if line.startswith(('CHANGED ', 'CHECKED ')))
    assert int(lines['CHECKED']) > 10000  # the snapshot saw the modules
    assert json.loads(lines['CHANGED']) == []
