"""Shell ``for`` loops of README command lines: what one line stands for.

Shared by the README runner (tests/test_docs/readme_runner.py), which runs
or checks each expansion, and by tests that look a command up in a README
(tests/test_configs/test_lastclip_configs.py).
"""
import re
import shlex
from typing import List, Optional, Tuple

__all__ = ['LOOP', 'expand', 'expanded_commands']

LOOP = re.compile(r'^for\s+(\w+)\s+in\s+(.*?);\s*do\s+(.*?);?\s*done$', re.S)


def expand(text: str) -> List[Tuple[Optional[str], str]]:
    """``(value, command)`` for each command a README command line stands
    for: a ``for X in ...; do BODY; done`` loop's body once per value
    (``$X`` / ``${X}`` replaced by it, as the shell does), else the line
    itself (value None)."""
    loop = LOOP.match(text)
    if not loop:
        return [(None, text)]
    name, values, body = loop.groups()
    variable = re.compile(r'\$(?:\{' + name + r'\}|' + name + r'\b)')
    return [(value, variable.sub(lambda _: value, body))
            for value in shlex.split(values)]


def expanded_commands(markdown: str) -> List[str]:
    """Every line of ``markdown`` with its loops expanded, and the commands
    joined by ``&&`` split: the commands a reader's shell would run."""
    out = []
    for line in markdown.splitlines():
        for _, text in expand(line.strip()):
            out += [part.strip() for part in text.split(' && ')]
    return out
