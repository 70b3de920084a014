"""Deprecated name of ``eva02_clip2mmlocat.py`` (one stem per model).

Same arguments: prints a deprecation message on stderr, then runs it.
"""
import os.path as osp
import runpy
import sys

NEW = 'eva02_clip2mmlocat.py'

if __name__ == '__main__':
    print(
        'eva2mmlocat.py is deprecated and will be removed; use '
        f'tools/model_converters/{NEW} (same arguments)',
        file=sys.stderr)
    script = osp.join(osp.dirname(osp.abspath(__file__)), NEW)
    sys.argv[0] = script
    runpy.run_path(script, run_name='__main__')
