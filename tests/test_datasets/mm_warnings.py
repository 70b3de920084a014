"""Warnings that mmengine's current logger emits (it does not propagate to
pytest's ``caplog``)."""
import contextlib
import logging
from typing import Iterator, List

from mmengine.logging import MMLogger


@contextlib.contextmanager
def logged_warnings() -> Iterator[List[str]]:
    """Collect the messages of the WARNING records logged in the block."""
    logger = MMLogger.get_current_instance()
    records: List[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    messages: List[str] = []
    logger.addHandler(handler)
    try:
        yield messages
    finally:
        logger.removeHandler(handler)
        messages.extend(r.getMessage() for r in records
                        if r.levelno == logging.WARNING)
