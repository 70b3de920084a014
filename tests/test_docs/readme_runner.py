"""Run a README block's own commands, as a user would type them.

:class:`ReadmeRunner` takes a :class:`readme_blocks.Block` (parsed from the
Markdown when the test runs, so a changed README changes what runs) and
executes its commands in a :class:`placeholders.UserRoot`:

* ``python SCRIPT ARGS`` (also ``.venv/bin/python``, with leading
  ``VAR=value`` assignments): the script runs in this process as
  ``python SCRIPT`` runs it (:func:`helpers.harness.run_in_process`, in
  the user root), so open_clip resolves the tiny models
  of :mod:`tiny_models`; exit status 0 is success.
* Tools that read a config (:data:`SHRUNK_TOOLS`) get the shrink as
  ``--cfg-options`` appended to the README's arguments: the differences
  that ``helpers.shrink.shrink_model`` (tower widths) and ``shrink_run``
  (batches, iterations) make to the config (:func:`shrink_options`).
* ``A && B``, ``cp SRC DST``, ``mkdir -p DIR`` and ``for X in ...; do
  ...; done`` as the shell runs them (the loop body once per value, ``$X``
  and ``${X}`` substituted: :func:`expand`); ``run(..., values=[...])``
  runs a loop for some of its values.
* :meth:`ReadmeRunner.check`: a command that differs from one the runner
  ran only in names is checked instead of run (``check`` markers); a loop
  is checked value by value.
* Placeholders: ALL-CAPS words (``CHECKPOINT``, ``RUN``) take the test's
  ``subs``; a path the :class:`~placeholders.UserRoot` knows is made before
  the command runs. A placeholder without a value, or an input that no
  command made and no placeholder fills, fails naming the file, the block,
  the command and the token.

Every command run or checked is recorded (:data:`EXECUTED`, per test) for
the check in ``conftest.py``; a loop only once each of its values has run
or been checked by the test.
"""
import os
import os.path as osp
import re
import shlex
import shutil
import time
from collections import defaultdict
from typing import Dict, List, Optional, Sequence, Set, Tuple

from helpers.harness import run_in_process, shipped_config
from helpers.readme_loops import expand
from helpers.shrink import shrink_model, shrink_run
from mmengine.config import DictAction
from readme_blocks import Block, Command

# Tools whose config argument is shrunk through --cfg-options.
SHRUNK_TOOLS = ('tools/test.py', 'tools/train.py', 'tools/infer.py',
                'tools/misc/check_dataset.py',
                'tools/deployment/pytorch2onnx.py')
PLACEHOLDER_WORD = re.compile(r'^[A-Z][A-Z0-9_]+$')
ASSIGNMENT = re.compile(r'^([A-Za-z_][A-Za-z0-9_]*)=(.*)$')
FILE_LIKE = re.compile(r'(/|\.(pt|pth|bin|safetensors|json|npy|jpg|png|txt|'
                       r'py|tar|tsv)$)')
TAIL = 6000

# (test node id) -> {(file, block index, command number)}
EXECUTED: Dict[str, Set[Tuple[str, int, int]]] = defaultdict(set)


def current_test() -> str:
    """The running test's node id (pytest sets PYTEST_CURRENT_TEST)."""
    return os.environ.get('PYTEST_CURRENT_TEST', '').split(' ')[0]


class ReadmeError(AssertionError):
    """A README command failed or cannot be run here."""


# ---------------------------------------------------------------- shrinking
def _format(value) -> str:
    if isinstance(value, tuple):
        inner = ','.join(_format(v) for v in value)
        return f'({inner},)' if len(value) == 1 else f'({inner})'
    if isinstance(value, list):
        return '[' + ','.join(_format(v) for v in value) + ']'
    return str(value)


def _leaves(value, path: str) -> List[Tuple[str, object]]:
    if isinstance(value, dict) and value:
        out = []
        for key, sub in value.items():
            out += _leaves(sub, f'{path}.{key}')
        return out
    return [(path, value)]


def _diff(before, after, path: str) -> List[Tuple[str, object]]:
    if before == after:
        return []
    if isinstance(before, dict) and isinstance(after, dict):
        if set(before) - set(after):  # a key removed: replace the dict
            return [(f'{path}._delete_', True)] + _leaves(after, path)
        out = []
        for key, value in after.items():
            if key in before:
                out += _diff(before[key], value, f'{path}.{key}')
            else:
                out += _leaves(value, f'{path}.{key}')
        return out
    if isinstance(after, dict):
        return [(f'{path}._delete_', True)] + _leaves(after, path)
    if (isinstance(before, (list, tuple)) and type(before) is type(after)
            and len(before) == len(after)
            and any(isinstance(v, dict) for v in after)):
        out = []
        for i, (old, new) in enumerate(zip(before, after)):
            out += _diff(old, new, f'{path}.{i}')
        return out
    return [(path, after)]


def shrink_options(config: str) -> List[str]:
    """``KEY=VALUE`` options that make a tool run ``config`` shrunk.

    Raises:
        ReadmeError: If a difference cannot be written as an option that
            mmengine's ``DictAction`` parses back to the same value.
    """
    shipped = shipped_config(config)
    small = shipped_config(config)
    shrink_model(small)
    shrink_run(small)
    before, after = shipped.to_dict(), small.to_dict()
    options = []
    for key in after:
        options += _diff(before.get(key), after[key], key) \
            if key in before else _leaves(after[key], key)
    texts = []
    for key, value in options:
        text = _format(value)
        parsed = DictAction._parse_iterable(text)
        if parsed != value or type(parsed) is not type(value):
            raise ReadmeError(f'cannot shrink {config}: {key}={value!r} does '
                              'not survive --cfg-options')
        texts.append(f'{key}={text}')
    return texts


# ------------------------------------------------------------------ runner
class ReadmeRunner:
    """Runs README blocks in a user root (module doc).

    Args:
        root: A :class:`placeholders.UserRoot`.
        subs: Values of ALL-CAPS placeholders for every command.
    """

    def __init__(self, root, subs: Optional[Dict[str, str]] = None) -> None:
        self.root = root
        self.subs = dict(subs or {})
        self.timings: List[Tuple[str, float]] = []
        # (file, block, command) -> [(script, args, inputs)] of what ran
        self.ran: Dict[Tuple[str, int, int], List[Tuple[str, List[str],
                                                        Set[str]]]] = {}
        self._scripts: List[Tuple[str, List[str], Set[str]]] = []
        # (file, block, command) -> the loop values run or checked so far
        self._covered: Dict[Tuple[str, int, int], Set[Optional[str]]] = \
            defaultdict(set)

    def _cover(self, block: Block, command: Command,
               values: Sequence[Optional[str]]) -> None:
        """Record ``values`` of ``command`` as run or checked; the command
        counts as executed (:data:`EXECUTED`) once all of them are."""
        key = (block.file, block.index, command.number)
        self._covered[key].update(values)
        if {v for v, _ in expand(command.text)} <= self._covered[key]:
            EXECUTED[current_test()].add(key)

    def _commands(self, block: Block, numbers: Sequence[int]) -> List[Command]:
        commands = block.commands()
        unknown = [n for n in numbers if not 1 <= n <= len(commands)]
        if unknown:
            raise ReadmeError(f'{block.name} has {len(commands)} commands, '
                              f'not {unknown}: the README changed')
        return [commands[n - 1] for n in numbers]

    def run(self,
            block: Block,
            lines: Optional[Sequence[int]] = None,
            subs: Optional[Dict[str, str]] = None,
            values: Optional[Sequence[str]] = None) -> List[str]:
        """Run commands ``lines`` (1-based; all by default) of ``block``, in
        order; returns what each printed. ``values``: run each of these
        loop commands for these of its values only (the others must be
        checked, :meth:`check`, for the command to count as executed)."""
        numbers = list(lines or range(1, len(block.commands()) + 1))
        outputs = []
        for command in self._commands(block, numbers):
            expanded = expand(command.text)
            if values is not None:
                have = [v for v, _ in expanded]
                unknown = [v for v in values if v not in have]
                if None in have or unknown:
                    raise ReadmeError(
                        f'{block.name} command {command.number} is no loop '
                        f'over {list(values)} (its values: {have}): the '
                        'README changed')
            self._scripts = []
            outputs.append(
                self.run_command(block, command, dict(self.subs, **subs or {}),
                                 values))
            self.ran[(block.file, block.index, command.number)] = \
                self._scripts
            self._cover(
                block, command,
                [v for v, _ in expanded if values is None or v in values])
        return outputs

    def check(self,
              block: Block,
              lines: Sequence[int],
              like: Tuple[Block, int],
              subs: Optional[Dict[str, str]] = None) -> List[List[str]]:
        """Check commands ``lines`` of ``block`` without running them
        against command ``like`` (a block and its command number) that this
        runner ran: the same script and options, each argument that differs
        is a config that loads, an input this root can fill or holds (where
        ``like`` read an existing file), or an output (where ``like`` wrote
        one). A loop is checked once per value (:func:`expand`). Returns
        each checked command's arguments (placeholders filled), a loop's in
        the order of its values."""
        model, number = like
        key = (model.file, model.index, number)
        if len(self.ran.get(key, ())) != 1:
            raise ReadmeError(f'{model.name} command {number} was not run '
                              'as one python command by this runner')
        script, model_args, inputs = self.ran[key][0]
        subs = dict(self.subs, **subs or {})
        checked = []
        for command in self._commands(block, list(lines)):
            for value, text in expand(command.text):
                checked.append(
                    self._check_one(
                        block, command, value, text, subs,
                        (model, number, script, model_args, inputs)))
                self._cover(block, command, [value])
        return checked

    def _check_one(self, block: Block, command: Command, value: Optional[str],
                   text: str, subs: Dict[str, str], like: tuple) -> List[str]:
        """Check one (expanded) command ``text`` (:meth:`check`)."""
        model, number, script, model_args, inputs = like
        where = (f'{block.file}:{command.line} (block {block.index}, '
                 f'command {command.number}: {command.text[:160]})')
        if value is not None:
            where += f' [{value}]'
        argv = self._substitute(shlex.split(text, comments=True), subs, where)
        while argv and ASSIGNMENT.match(argv[0]):
            argv = argv[1:]
        if argv[:2] != ['python', script] or len(argv) - 2 != len(model_args):
            raise ReadmeError(f'{where}: not the shape of {model.name} '
                              f'command {number} (python {script} with '
                              f'{len(model_args)} arguments)')
        args = argv[2:]
        for mine, theirs in zip(args, model_args):
            if mine == theirs:
                continue
            if theirs.startswith('-') or mine.startswith('-'):
                raise ReadmeError(f'{where}: option {mine} where the run '
                                  f'command has {theirs}')
            if re.match(r'^configs/.+\.py$', mine):
                shipped_config(mine)
            elif theirs in inputs and not (self.root.knows(mine)
                                           or osp.exists(self.root.abs(mine))):
                raise ReadmeError(
                    f'{where}: input {mine} (where the run command read '
                    f'{theirs}) is no placeholder and no command made it')
        return args

    def run_command(self,
                    block: Block,
                    command: Command,
                    subs: Dict[str, str],
                    values: Optional[Sequence[str]] = None) -> str:
        """Run one command line (a loop: for ``values`` of it, or all)."""
        where = (f'{block.file}:{command.line} (block {block.index}, '
                 f'command {command.number}: {command.text[:160]})')
        out = []
        for value, text in expand(command.text):
            if value is None:
                out.append(self._line(text, subs, where))
            elif values is None or value in values:
                out.append(self._line(text, subs, f'{where} [{value}]'))
        return ''.join(out)

    def _line(self, text: str, subs: Dict[str, str], where: str) -> str:
        tokens = shlex.split(text, comments=True)
        out, argv = [], []
        for token in tokens + ['&&']:
            if token == '&&':
                if argv:
                    out.append(self._argv(argv, subs, where))
                argv = []
            elif token in (';', '||', '|', '>', '<'):
                raise ReadmeError(f'{where}: {token!r} is not run by the '
                                  'README tests; split the command')
            else:
                argv.append(token)
        return ''.join(out)

    def _substitute(self, argv: List[str], subs: Dict[str, str],
                    where: str) -> List[str]:
        result = []
        for token in argv:
            parts = token.split('/')
            for i, part in enumerate(parts):
                if PLACEHOLDER_WORD.match(part):
                    if part not in subs:
                        raise ReadmeError(
                            f'{where}: placeholder {part} has no value: the '
                            'test must give it (subs={...})')
                    parts[i] = subs[part]
            result.append('/'.join(parts))
        return result

    def _argv(self, argv: List[str], subs: Dict[str, str], where: str) -> str:
        env = {}
        while argv and ASSIGNMENT.match(argv[0]):
            key, value = ASSIGNMENT.match(argv[0]).groups()
            env[key] = value
            argv = argv[1:]
        argv = self._substitute(argv, subs, where)
        prog = argv[0]
        if prog == 'cp':
            return self._copy(argv[1:], where)
        if prog == 'mkdir' and argv[1:2] == ['-p']:
            for folder in argv[2:]:
                os.makedirs(self.root.abs(folder), exist_ok=True)
            return ''
        if prog in ('python', 'python3') or prog.endswith('/python'):
            return self._python(argv[1], argv[2:], env, where)
        raise ReadmeError(f'{where}: {prog} is not run by the README tests; '
                          'mark the command skip with the reason')

    def _fill(self, args: Sequence[str]) -> List[str]:
        """Make the placeholders ``args`` name; the file-like arguments that
        name nothing yet (outputs, or inputs nobody made)."""
        missing = []
        for arg in args:
            for token in sorted({arg, arg.split('=', 1)[-1]}):
                if not FILE_LIKE.search(token):
                    continue
                if self.root.knows(token) or self.root.knows(token + '/'):
                    self.root.fill(
                        token if self.root.knows(token) else token + '/')
                elif not osp.exists(self.root.abs(token)):
                    missing.append(token)
        return missing

    def _copy(self, args: List[str], where: str) -> str:
        self._fill(args[:1])
        src, dst = (self.root.abs(a) for a in args)
        if not osp.isfile(src):
            raise ReadmeError(f'{where}: cp: {args[0]} does not exist (no '
                              'command made it and no placeholder fills it)')
        shutil.copy(src, dst)
        return ''

    def _python(self, script: str, args: List[str], env: Dict[str, str],
                where: str) -> str:
        if script.startswith('-'):
            raise ReadmeError(f'{where}: python {script} is not run by the '
                              'README tests')
        path = self.root.abs(script)
        if not osp.isfile(path):
            raise ReadmeError(f'{where}: {script} does not exist')
        missing = self._fill(args)
        inputs = {
            a
            for a in args
            if FILE_LIKE.search(a) and osp.exists(self.root.abs(a))
        }
        self._scripts.append((script, list(args), inputs))
        if script in SHRUNK_TOOLS:
            config = next(
                (a for a in args if re.match(r'^configs/.+\.py$', a)), None)
            if config is None:
                raise ReadmeError(f'{where}: no configs/*.py argument')
            options = shrink_options(config)
            if options:
                args = list(args) + ['--cfg-options'] + options
        start = time.time()
        code, output = self._run_script(path, script, args, env)
        self.timings.append((where, time.time() - start))
        if code not in (0, None):
            hint = ''
            if missing:
                hint = (f'\nArguments naming no file before the command: '
                        f'{missing}. If one of them is an input, it is a '
                        'README placeholder the tests cannot fill: add it to '
                        'tests/test_docs/placeholders.py')
            raise ReadmeError(f'{where}: exit status {code}{hint}\n'
                              f'--- output (tail) ---\n{output[-TAIL:]}')
        return output

    def _run_script(self, path: str, script: str, args: List[str],
                    env: Dict[str, str]) -> Tuple[object, str]:
        """``python SCRIPT ARGS`` in this process: (exit status, output)."""
        done = run_in_process(path, list(args), cwd=self.root.path, env=env)
        return done.returncode, done.output


def executed_by(test: str) -> Set[Tuple[str, int, int]]:
    """The commands ``test`` ran (``(file, block, number)``)."""
    return set(EXECUTED.get(test, ()))


def take(block: Block) -> str:
    """The code of a Python block, recorded as run by the current test
    (which runs it: e.g. builds it as a config)."""
    if block.language != 'python':
        raise ReadmeError(f'{block.name} is not a Python block')
    EXECUTED[current_test()].add((block.file, block.index, 1))
    return block.text
