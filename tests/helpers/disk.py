"""How much disk a test run needs, checked before its first test
(``tests/conftest.py``): out of space, every later test fails with errors
that do not say why."""
import os
import os.path as osp
import shutil
import tempfile
from typing import Optional, Sequence

# What a run writes under pytest's base temporary folder (setup.cfg deletes
# a passing test's tmp_path when it ends): the largest test holds ~1.3 GB
# (LaSt training with ViT-B/16 checkpoints); a whole `make test` peaked at
# 4.4 GB (2 processes; 4.1 GB in one), FULL_RUN_GB with some margin.
LARGEST_TEST_GB = 1.3
FULL_RUN_GB = 6.0
MIN_FREE_ENV = 'MMLOCAT_TEST_MIN_FREE_GB'


def needed_free_gb(items: Sequence) -> float:
    """Free space a selection of tests needs: the largest test's once, and
    again for each end-to-end or slow test (they write the checkpoints), at
    most a whole run's peak; ``MMLOCAT_TEST_MIN_FREE_GB`` overrides it."""
    if os.environ.get(MIN_FREE_ENV):
        return float(os.environ[MIN_FREE_ENV])
    heavy = sum(
        1 for item in items
        if item.get_closest_marker('e2e') or item.get_closest_marker('slow'))
    return min(FULL_RUN_GB, LARGEST_TEST_GB * (1 + heavy))


def short_of_space(basetemp: Optional[str], items: Sequence) -> str:
    """Why ``items`` cannot run with the space left where pytest writes
    their files (``basetemp``, else the system's temporary folder), or
    ``''`` when they can."""
    folder = osp.abspath(basetemp or tempfile.gettempdir())
    while not osp.exists(folder):
        folder = osp.dirname(folder)
    free = shutil.disk_usage(folder).free / 2**30
    need = needed_free_gb(items)
    if free >= need:
        return ''
    return (f'{free:.1f} GB free under {folder}, where pytest writes the '
            f'tests\' files; these {len(items)} tests need about {need:.1f} '
            'GB: free some space, point --basetemp at a larger disk, or set '
            f'{MIN_FREE_ENV}=0 to run anyway')
