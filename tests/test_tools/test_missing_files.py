"""tools/train.py and tools/test.py end a missing config / checkpoint with
one line and exit 2, as argparse reports a bad argument (no traceback)."""
import pytest
from helpers.harness import run_tool

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
def test_missing_file_is_one_line(args, message):
    tool, *rest = args
    proc = run_tool(f'tools/{tool}', *rest)
    assert proc.returncode == 2
    assert 'Traceback' not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == message
