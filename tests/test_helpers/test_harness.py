"""tests/helpers/harness.py: the one tool launcher and config loader."""
import pytest
from helpers.harness import run_tool, shipped_config

# A Runner names its logger by the second it starts (mmengine's
# experiment name): two runs in one second ask for the same name.
SCRIPT = '''
import os
import sys
from mmengine.logging import MMLogger, print_log
from mmengine.registry import DefaultScope
assert DefaultScope.get_current_instance() is None, 'scope leaked in'
DefaultScope.get_instance('run', scope_name='mmdet')
logger = MMLogger.get_instance('tool_20260101_000000', log_level='INFO')
logger.info('said ' + sys.argv[1])
print_log('err ' + sys.argv[1], logger='current')
os.write(2, b'below python\\n')  # as OpenCV writes
child = os.fork()  # a data loader worker, printing
if child == 0:
    print('from a worker ' + sys.argv[1], flush=True)
    os._exit(0)
os.waitpid(child, 0)
if sys.argv[1] == 'fail':
    raise RuntimeError('broken tool')
sys.exit(None if sys.argv[1] == 'ok' else sys.argv[1])
'''


@pytest.fixture
def tool(tmp_path):
    path = tmp_path / 'tool.py'
    path.write_text(SCRIPT)
    return str(path)


def test_in_process_runs_start_fresh(tool, tmp_path):
    """Two in-process runs in one second each get their own logger (and
    so their own output), and no default scope leaks in or out."""
    from mmengine.registry import DefaultScope
    first = run_tool(tool, 'ok', cwd=str(tmp_path))
    second = run_tool(tool, 'ok2', cwd=str(tmp_path))
    assert first.returncode == 0 and second.returncode == 1
    assert 'said ok' in first.output and 'said ok2' not in first.output
    assert 'said ok2' in second.output and 'err ok2' in second.output
    assert 'ok2' in second.stderr  # sys.exit('ok2') prints it
    assert first.stderr.count('below python') == 1
    assert 'from a worker ok\n' in first.stdout
    assert DefaultScope.get_current_instance() is None


def test_exception_is_status_one(tool):
    done = run_tool(tool, 'fail')
    assert done.returncode == 1
    assert 'RuntimeError: broken tool' in done.stderr


def test_isolate_needs_a_reason(tool):
    with pytest.raises(ValueError, match='isolate= must say why'):
        run_tool(tool, 'ok', isolate='  ')
    done = run_tool(tool, 'ok', isolate='checks the subprocess path')
    assert done.returncode == 0 and 'said ok' in done.output


def test_shipped_config_is_a_copy():
    name = 'configs/locat/locat-b_8xb128_in1k.py'
    first = shipped_config(name)
    first.model.type = 'Changed'
    assert shipped_config(name).model.type != 'Changed'
    with pytest.raises(FileNotFoundError, match='relative to the reposi'):
        shipped_config('configs/nope.py')


def test_instances_a_test_made_are_dropped_after_it(tmp_path):
    """What conftest's isolate_mmengine_instances does after each test: a
    visualizer or logger made inside is gone (the logger's files closed),
    one made before is the same object."""
    from helpers.harness import new_globals_dropped
    from mmengine.logging import MMLogger
    from mmengine.visualization import Visualizer
    before = Visualizer.get_instance('made_before')
    with new_globals_dropped():
        inside = Visualizer.get_instance(
            'made_inside', save_dir=str(tmp_path / 'vis'))
        logger = MMLogger.get_instance(
            'logged_inside', log_file=str(tmp_path / 'run.log'))
        assert Visualizer.get_instance('made_inside') is inside
    assert Visualizer.get_instance('made_before') is before
    assert not Visualizer.check_instance_created('made_inside')
    assert not MMLogger.check_instance_created('logged_inside')
    assert logger.handlers == []
