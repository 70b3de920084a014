"""Which optional OpenMMLab hosts are importable, without importing them."""
import importlib.util

__all__ = ['is_installed']


def is_installed(package: str) -> bool:
    """Whether ``package`` can be imported (it is not imported here)."""
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):  # e.g. sys.modules[package] is None
        return False
