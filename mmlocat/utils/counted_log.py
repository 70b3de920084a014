"""A warning that repeats with a running count, at 1, 10, 100, ... events.

For events that happen per sample inside data workers (a caption
truncated, a label map resized): the first one is logged at once with an
example, later ones only at powers of ten, so a run where every sample is
affected logs a handful of lines, never none. Each process counts its own
events (data workers do not share memory).
"""
import logging
import os

from mmengine.logging import print_log

__all__ = ['CountedWarning']


class CountedWarning:
    """Count events; log a warning at the 1st, 10th, 100th, ... of them.

    Args:
        what: What is counted, e.g. ``'captions longer than 77 tokens
            truncated'``.
    """

    def __init__(self, what: str) -> None:
        self.what = what
        self.count = 0
        self._next = 1

    def add(self, example: str) -> None:
        """Count one event; ``example`` names it in the logged line."""
        self.count += 1
        if self.count < self._next:
            return
        self._next *= 10
        print_log(
            f'{self.what}: {self.count} so far in process {os.getpid()} '
            f'(logged at 1, 10, 100, ...), e.g. {example}',
            logger='current',
            level=logging.WARNING)

    def __getstate__(self) -> dict:
        # a copy sent to a data worker counts that worker's events
        return dict(what=self.what, count=0, _next=1)
