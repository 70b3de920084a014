"""Run a tool script in this process as ``python SCRIPT ARGS`` would
(``runpy.run_path(..., run_name='__main__')`` with ``sys.argv`` set, in the
repository root), returning its exit status and output: the mechanism of
``tests/test_docs/readme_runner.py`` without the README parsing."""
import contextlib
import io
import os
import runpy
import sys
import traceback
from typing import List, Tuple
from unittest import mock

REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class _Tee(io.TextIOBase):
    """Write to a buffer and to the stream pytest captures."""

    def __init__(self, buffer: io.StringIO, stream) -> None:
        self.buffer_, self.stream = buffer, stream

    def write(self, text: str) -> int:
        self.buffer_.write(text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return False


def run_script(script: str, args: List[str]) -> Tuple[object, str]:
    """``python SCRIPT ARGS`` in this process, from the repository root:
    (exit status, stdout + stderr). An exception is status
    ``'an exception'`` with its traceback in the output."""
    buffer = io.StringIO()
    code: object = 0
    cwd = os.getcwd()
    # MMLOCAT_FORMAT_CONFIG=0: mmengine's config text unformatted (seconds
    # of yapf per dump otherwise; the same loadable config)
    with mock.patch.dict(os.environ, MMLOCAT_FORMAT_CONFIG='0'), \
            mock.patch.object(sys, 'argv', [script] + list(args)), \
            contextlib.redirect_stdout(_Tee(buffer, sys.stdout)), \
            contextlib.redirect_stderr(_Tee(buffer, sys.stderr)):
        os.chdir(REPO)
        try:
            runpy.run_path(os.path.join(REPO, script), run_name='__main__')
        except SystemExit as err:
            code = err.code
            if isinstance(code, str):
                buffer.write(code + '\n')
                code = 1
        except Exception:  # the traceback is the failure's message
            buffer.write(traceback.format_exc())
            code = 'an exception'
        finally:
            os.chdir(cwd)
    return code, buffer.getvalue()
