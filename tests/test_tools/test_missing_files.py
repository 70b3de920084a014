"""tools/train.py and tools/test.py end a missing config / checkpoint with
one line and exit 2, as argparse reports a bad argument (no traceback)."""
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e

DEMO = 'configs/demo/upernet_locat-t_tiny-ade20k.py'


@pytest.mark.parametrize('args, message', [
    (['train.py', 'no/cfg.py'], 'train.py: error: config file not found: '
     'no/cfg.py'),
    (['test.py', 'no/cfg.py', 'x.pth'], 'test.py: error: file not found: '
     'no/cfg.py'),
    (['test.py', DEMO, 'no/x.pth'], 'test.py: error: file not found: '
     'no/x.pth'),
])
def test_missing_file_is_one_line(args, message, repo_root, subprocess_env):
    tool, *rest = args
    proc = subprocess.run([sys.executable, f'tools/{tool}', *rest],
                          capture_output=True,
                          text=True,
                          env=subprocess_env,
                          cwd=repo_root,
                          timeout=120)
    assert proc.returncode == 2
    assert 'Traceback' not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == message
