"""Optional packages: which OpenMMLab hosts are importable (without
importing them), and the one import of open_clip."""
import importlib.util

__all__ = ['is_installed', 'require_open_clip']


def is_installed(package: str) -> bool:
    """Whether ``package`` can be imported (it is not imported here)."""
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):  # e.g. sys.modules[package] is None
        return False


def require_open_clip(purpose: str):
    """The ``open_clip`` module, or an ImportError that says who needs it
    (``purpose``, e.g. ``'the CLIP text tower'``) and how to install it."""
    try:
        import open_clip
    except ImportError as err:
        raise ImportError(f'{purpose} needs open_clip: pip install '
                          'open_clip_torch') from err
    return open_clip
