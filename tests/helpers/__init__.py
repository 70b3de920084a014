"""Test-only helpers: tiny model configs and checkpoints, references written
from ``docs/method.md``, planted data faults, import-graph and host-sync
probes.

Imported by the tests as ``helpers.<module>`` (``tests/`` is on ``sys.path``
under pytest); nothing in ``mmlocat/`` or
``tools/`` imports them. The dataset generators users also run
(``tools/dataset_converters/make_tiny_datasets.py``) stay in
:mod:`mmlocat.testing`.
"""
