"""Every shipped recipe declares mmlocat's runtime (issue 37).

Here, not in tests/test_engine/test_runtime.py: the configs are the
session's parsed ones (:func:`checkpoint_makers.load_config`), not ~200
more parses.
"""
import pytest
from checkpoint_makers import load_config, shipped_configs

from mmlocat.engine.runtime import RUNNER_TYPE


@pytest.mark.slow
def test_every_shipped_recipe_declares_the_runtime():
    """Every config under configs/ (not the bases) has the runtime line,
    through configs/_base_/mmlocat_runtime.py."""
    leaves = shipped_configs()
    assert len(leaves) > 150
    missing = [
        f for f in leaves if load_config(f).get('runner_type') != RUNNER_TYPE
    ]
    assert missing == []
