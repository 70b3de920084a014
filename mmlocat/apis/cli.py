"""Command-line options the model-running tools share.

``tools/infer.py``, ``tools/deployment/pytorch2onnx.py`` and the
``tools/analysis_tools/vis_*.py`` scripts build a model from a config and a
checkpoint; their ``--device``, ``--alpha`` and ``--cfg-options`` options are
declared here once so their names, defaults and help stay the same
(``--cfg-options`` by :func:`mmlocat.utils.launch.add_cfg_options`, as
``tools/train.py`` / ``tools/test.py`` declare it).
"""
import argparse
from typing import Optional

from mmlocat.utils.launch import add_cfg_options

__all__ = ['add_model_options']


def add_model_options(parser: argparse.ArgumentParser,
                      device: bool = True,
                      alpha: Optional[float] = None,
                      alpha_help: str = 'heat-map opacity',
                      new_keys: bool = False) -> None:
    """Add the options of a tool that builds and runs a model.

    Args:
        parser: The tool's parser.
        device: Add ``--device`` (default ``cpu``).
        alpha: Add ``--alpha`` (overlay opacity) with this default; no
            ``--alpha`` when None.
        alpha_help: The help text of ``--alpha``.
        new_keys: Add ``--cfg-new-keys`` (for a tool whose overrides go
            through :func:`mmlocat.utils.launch.merge_cfg_options`).
    """
    if device:
        parser.add_argument('--device', default='cpu', help='e.g. cpu, cuda:0')
    if alpha is not None:
        parser.add_argument(
            '--alpha', type=float, default=alpha, help=alpha_help)
    add_cfg_options(parser, new_keys=new_keys)
