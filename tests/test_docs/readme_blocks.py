"""The fenced blocks of the READMEs and their ``readme-test`` markers.

Every fenced block of :data:`DOC_FILES` that holds commands a user would
type carries a marker, an HTML comment on the line before its fence
(invisible on GitHub)::

    <!-- readme-test: run tests/test_docs/test_readme_root.py::test_infer -->
    <!-- readme-test: skip: needs a CUDA GPU -->
    <!-- readme-test: run tests/test_docs/test_x.py::test_a lines 1-2;
         run tests/test_docs/test_x.py::test_b lines 3;
         skip lines 4: needs 8 GPUs -->

Clauses are separated by ``;`` (before ``run`` / ``check`` / ``skip``).
``run TEST [lines N,M-K]`` names the test that executes those commands of
the block (all of them without ``lines``); ``check TEST lines ...`` names
the test that checks commands differing from one it runs only in names
(another config, tower or dataset of the same command): same script and
options, every config loads, every input is a placeholder the test can fill
or a file an earlier command made (``ReadmeRunner.check``);
``skip [lines ...]: REASON`` says why they are not run here. The commands of
a block are numbered from 1 in order: its logical lines (``\\``
continuations joined), without comments and blank lines; a shell ``for``
loop is one command that runs once per value. Every command must be covered
by a clause; ``tests/test_docs/test_readme_markers.py`` checks the markers,
and each run test checks, when it ends, that it executed every command
assigned to it (``conftest.py``).
"""
import glob
import os.path as osp
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
# The files whose blocks are checked (relative to the repository root).
DOC_PATTERNS = ('README.md', 'configs/*/README.md', 'docs/**/*.md')
# Languages of blocks that hold what a user types: a marker is required.
COMMAND_LANGUAGES = ('shell', 'bash', 'sh', 'console', 'zsh', 'python')
# A block of another language (or none) needs a marker too when a line
# reads like a command.
COMMAND_LINE = re.compile(r'^\s*(\$\s+)?(python\d?\s|bash\s|sh\s|make\s|pip\s|'
                          r'tools/\S+\.(py|sh)\b|\.venv/|sbatch\s|srun\s|'
                          r'torchrun\s|[A-Z_]+=\S*\s)')
MARKER = re.compile(r'<!--\s*readme-test:(.*?)-->', re.S)
FENCE = re.compile(r'^(\s*)(```+|~~~+)\s*([\w+-]*)\s*$')
RUN_CLAUSE = re.compile(r'^(run|check)\s+(\S+)(?:\s+lines\s+([\d,\s-]+))?$')
# Clause kinds that name a test.
TEST_KINDS = ('run', 'check')
SKIP_CLAUSE = re.compile(r'^skip(?:\s+lines\s+([\d,\s-]+))?\s*:\s*(\S.*)$')


def doc_files() -> List[str]:
    """The checked Markdown files, relative to the repository root."""
    found = set()
    for pattern in DOC_PATTERNS:
        for path in glob.glob(osp.join(REPO, pattern), recursive=True):
            found.add(osp.relpath(path, REPO))
    return sorted(found)


@dataclass
class Command:
    """One logical command line of a block."""
    number: int  # 1-based, in the block
    line: int  # 1-based line of the Markdown file where it starts
    text: str  # continuations joined


@dataclass
class Clause:
    """One clause of a marker."""
    kind: str  # 'run', 'check' or 'skip'
    lines: Optional[List[int]]  # None: every command of the block
    test: str = ''  # run / check: the test's node id
    reason: str = ''  # skip: why


@dataclass
class Block:
    """A fenced block of a Markdown file."""
    file: str
    index: int  # 1-based among the file's fenced blocks
    line: int  # 1-based line of the opening fence
    language: str
    text: str
    marker: Optional[str] = None  # the marker's text, if any
    clauses: List[Clause] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f'{self.file} block {self.index} (line {self.line})'

    def needs_marker(self) -> bool:
        if self.language in COMMAND_LANGUAGES:
            return True
        return any(COMMAND_LINE.match(line) for line in self.text.splitlines())

    def commands(self) -> List[Command]:
        """The block's commands; a Python block is one (its code)."""
        if self.language == 'python':
            return [Command(1, self.line + 1, self.text)]
        return split_commands(self.text, self.line + 1)

    def tests(self) -> List[str]:
        return sorted({c.test for c in self.clauses if c.kind in TEST_KINDS})

    def lines_of(self,
                 test: str,
                 kinds: Tuple[str, ...] = TEST_KINDS) -> List[int]:
        """The command numbers the marker assigns to ``test`` (as one of
        ``kinds``)."""
        numbers = []
        count = len(self.commands())
        for clause in self.clauses:
            if clause.kind in kinds and clause.test == test:
                numbers += clause.lines or list(range(1, count + 1))
        return sorted(set(numbers))


def parse_line_numbers(text: str) -> List[int]:
    """``'1,3-5'`` -> ``[1, 3, 4, 5]``."""
    numbers = []
    for part in text.replace(' ', '').split(','):
        if not part:
            continue
        if '-' in part:
            first, last = (int(p) for p in part.split('-'))
            numbers += list(range(first, last + 1))
        else:
            numbers.append(int(part))
    return numbers


def parse_marker(text: str, where: str) -> List[Clause]:
    """The clauses of a marker's text.

    Raises:
        ValueError: Naming ``where`` and the clause that does not parse.
    """
    clauses = []
    for raw in re.split(r';\s*(?=(?:run|check|skip)\b)', text):
        clause = ' '.join(raw.split())
        if not clause:
            continue
        run = RUN_CLAUSE.match(clause)
        skip = SKIP_CLAUSE.match(clause)
        if run:
            lines = parse_line_numbers(run.group(3)) if run.group(3) else None
            clauses.append(Clause(run.group(1), lines, test=run.group(2)))
        elif skip:
            lines = parse_line_numbers(skip.group(1)) if skip.group(1) \
                else None
            clauses.append(Clause('skip', lines, reason=skip.group(2)))
        else:
            raise ValueError(
                f'{where}: readme-test marker clause {clause!r} is none of '
                "'run TEST [lines N,M-K]', 'check TEST lines N,M-K', "
                "'skip [lines N,M-K]: REASON'")
    if not clauses:
        raise ValueError(f'{where}: empty readme-test marker')
    return clauses


def split_commands(text: str, first_line: int = 1) -> List[Command]:
    """The logical command lines of a block's text (module docstring)."""
    commands: List[Command] = []
    pending, start = '', 0
    lines = text.split('\n')
    for offset, line in enumerate(lines):
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith('#')):
            continue
        if not pending:
            start = first_line + offset
        if stripped.endswith('\\'):
            pending += stripped[:-1].rstrip() + ' '
            continue
        pending += stripped
        commands.append(Command(len(commands) + 1, start, pending))
        pending = ''
    if pending:
        commands.append(Command(len(commands) + 1, start, pending.strip()))
    return _join_loops(commands)


def _join_loops(commands: List[Command]) -> List[Command]:
    """A ``for ...; do`` ... ``done`` spread over lines is one command."""
    joined: List[Command] = []
    loop: Optional[Command] = None
    for command in commands:
        if loop is None and re.match(r'^for\s', command.text) \
                and not re.search(r'\bdone\s*$', command.text):
            loop = Command(0, command.line, command.text)
            continue
        if loop is not None:
            sep = ' ' if loop.text.endswith(('do', ';')) else '; '
            loop.text += sep + command.text
            if re.search(r'\bdone\s*$', command.text):
                joined.append(loop)
                loop = None
            continue
        joined.append(command)
    if loop is not None:
        joined.append(loop)
    for number, command in enumerate(joined, 1):
        command.number = number
    return joined


def parse_blocks(path: str) -> List[Block]:
    """The fenced blocks of ``path`` (relative to the repository root),
    with their markers parsed.

    Raises:
        ValueError: A marker that does not parse, or an unclosed fence.
    """
    with open(osp.join(REPO, path), encoding='utf-8') as f:
        return parse_text(f.read(), path)


def parse_text(text: str, path: str) -> List[Block]:
    """The fenced blocks of Markdown ``text`` (named ``path``), with their
    markers parsed (:func:`parse_blocks`)."""
    lines = text.split('\n')
    blocks: List[Block] = []
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence, language = match.groups()
        end = i + 1
        while end < len(lines) and lines[end].strip() != fence:
            end += 1
        if end == len(lines):
            raise ValueError(f'{path}:{i + 1}: unclosed {fence} block')
        body = [
            line[len(indent):] if line.startswith(indent) else line
            for line in lines[i + 1:end]
        ]
        block = Block(path,
                      len(blocks) + 1, i + 1, language.lower(),
                      '\n'.join(body))
        block.marker = _marker_before(lines, i)
        if block.marker is not None:
            block.clauses = parse_marker(block.marker, block.name)
        blocks.append(block)
        i = end + 1
    return blocks


def _marker_before(lines: List[str], fence: int) -> Optional[str]:
    """The text of a ``readme-test`` comment ending on the line before the
    fence (blank lines between are allowed)."""
    j = fence - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    if j < 0 or not lines[j].strip().endswith('-->'):
        return None
    start = j
    while start >= 0 and '<!--' not in lines[start]:
        start -= 1
    if start < 0:
        return None
    match = MARKER.search('\n'.join(lines[start:j + 1]))
    return match.group(1) if match else None


def all_blocks() -> List[Block]:
    """The blocks of every checked file."""
    return [b for path in doc_files() for b in parse_blocks(path)]


def find_block(path: str, contains: str) -> Block:
    """The one block of ``path`` whose text contains ``contains``.

    Raises:
        LookupError: Naming the file and the text when there is not
            exactly one such block.
    """
    found = [b for b in parse_blocks(path) if contains in b.text]
    if len(found) != 1:
        raise LookupError(
            f'{path}: {len(found)} blocks contain {contains!r} (expected '
            'exactly one); the README changed: update the test')
    return found[0]


def blocks_of_test(test: str) -> List[Tuple[Block, List[int]]]:
    """``(block, command numbers)`` the markers assign to ``test``."""
    return [(b, b.lines_of(test)) for b in all_blocks() if test in b.tests()]


def block_summary() -> Dict[str, Tuple[int, int, int, int]]:
    """Per file: (blocks a test runs or checks, blocks skipped, commands
    run, commands checked)."""
    summary: Dict[str, Tuple[int, int, int, int]] = {}
    for block in all_blocks():
        if not block.clauses:
            continue
        tested, skipped, run, checked = summary.get(block.file, (0, 0, 0, 0))
        ran = {n for t in block.tests() for n in block.lines_of(t, ('run', ))}
        seen = {n for t in block.tests() for n in block.lines_of(t)}
        if seen:
            tested += 1
        else:
            skipped += 1
        summary[block.file] = (tested, skipped, run + len(ran),
                               checked + len(seen - ran))
    return summary
