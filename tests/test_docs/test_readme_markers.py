"""Every command block of the READMEs is run by a test or says why not,
every link of theirs leads somewhere, and the root README stays short.

The blocks of README.md, configs/*/README.md and docs/**/*.md
(readme_blocks.py): a block holding commands without a ``readme-test``
marker fails, as does a marker naming a test that does not exist, a command
no clause covers, or a command both run and skipped. Whether each run test
really ran its commands is checked when it ends (conftest.py). The runner's
own errors for a placeholder it cannot fill are checked here too. In the
same files every relative link must name an existing file and every
``#anchor`` a heading of its page (GitHub's anchor rule, the one
``test_method_doc.py`` applies to ``docs/method.md`` citations).
"""
import ast
import os
import os.path as osp
import re
from functools import lru_cache

import pytest
from readme_blocks import (REPO, TEST_KINDS, Block, all_blocks, block_summary,
                           doc_files, parse_marker, parse_text, split_commands)
from readme_runner import (ReadmeError, ReadmeRunner, current_test,
                           executed_by, expand)
from test_method_doc import heading_anchors

BLOCKS = all_blocks()


@lru_cache(maxsize=None)
def _tests_in(path: str):
    full = osp.join(REPO, path)
    if not osp.isfile(full):
        return None
    with open(full, encoding='utf-8') as f:
        tree = ast.parse(f.read())
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name.startswith('test_')
    }


def _check_block(block: Block) -> list:
    problems = []
    if block.marker is None:
        if block.needs_marker():
            problems.append(
                f'{block.name} ({block.language or "no language"}) holds '
                'commands but has no <!-- readme-test: run TEST --> or '
                '<!-- readme-test: skip: REASON --> marker before its fence')
        return problems
    count = len(block.commands())
    covered = {n: [] for n in range(1, count + 1)}
    for clause in block.clauses:
        numbers = clause.lines or list(covered)
        bad = [n for n in numbers if n not in covered]
        if bad:
            problems.append(f'{block.name}: lines {bad} of a clause are not '
                            f'commands of the block (it has {count})')
        for n in numbers:
            covered.setdefault(n, []).append(clause.kind)
        if clause.kind in TEST_KINDS:
            path, _, name = clause.test.partition('::')
            found = _tests_in(path)
            if found is None:
                problems.append(f'{block.name}: the marker names '
                                f'{clause.test}, but {path} does not exist')
            elif name.split('[')[0] not in found:
                problems.append(f'{block.name}: the marker names '
                                f'{clause.test}, but {path} has no {name}')
    for number, kinds in covered.items():
        if not kinds:
            problems.append(f'{block.name}: command {number} is neither run '
                            'nor skipped by its marker')
        elif 'skip' in kinds and len(set(kinds)) > 1:
            problems.append(f'{block.name}: command {number} is both run '
                            '(or checked) and skipped')
    return problems


def test_every_command_block_is_run_or_skipped_with_a_reason():
    problems = [p for block in BLOCKS for p in _check_block(block)]
    assert not problems, '\n'.join(problems)
    for file, (tested, skipped, run,
               checked) in sorted(block_summary().items()):
        print(f'{file}: {tested} blocks tested ({run} commands run, '
              f'{checked} checked), {skipped} skipped')


def _block(text: str, marker: str = None) -> Block:
    block = Block('X.md', 1, 10, 'shell', text)
    if marker is not None:
        block.marker = marker
        block.clauses = parse_marker(marker, block.name)
    return block


def test_the_check_finds_unmarked_and_badly_marked_blocks():
    two = 'python tools/a.py\npython tools/b.py'
    assert 'has no' in _check_block(_block(two))[0]
    missing = _check_block(
        _block(two, ' run tests/test_docs/test_nothing.py::test_x '))
    assert 'does not exist' in missing[0]
    partial = _check_block(
        _block(
            two, ' run tests/test_docs/test_readme_markers.py::test_not_there '
            'lines 1'))
    assert any('has no test_not_there' in p for p in partial)
    assert any('command 2 is neither run nor skipped' in p for p in partial)
    both = _check_block(_block(two, ' skip: why; skip lines 1: x '))
    assert not both  # two skips are fine
    mixed = _check_block(
        _block(
            two, ' run tests/test_docs/test_readme_markers.py::'
            'test_the_check_finds_unmarked_and_badly_marked_blocks lines 1,2;'
            ' skip lines 2: no '))
    assert mixed == [
        'X.md block 1 (line 10): command 2 is both run (or '
        'checked) and skipped'
    ]
    checked = _check_block(
        _block(
            two, ' run tests/test_docs/test_readme_markers.py::'
            'test_the_check_finds_unmarked_and_badly_marked_blocks lines 1;'
            ' check tests/test_docs/test_readme_markers.py::'
            'test_the_check_finds_unmarked_and_badly_marked_blocks lines 2'))
    assert not checked
    with pytest.raises(ValueError, match='is none of'):
        parse_marker(' maybe later ', 'X.md')
    python = Block('X.md', 2, 1, 'python', 'x = 1')
    assert python.needs_marker()
    text = Block('X.md', 3, 1, 'text', 'logit scale 100')
    assert not text.needs_marker()
    assert Block('X.md', 4, 1, '', 'python tools/x.py A').needs_marker()


def test_commands_join_continuations_loops_and_skip_comments():
    text = ('# a comment\n'
            'python tools/a.py \\\n    --x 1  # trailing\n'
            '\n'
            'for d in a b; do\n'
            '  python tools/b.py $d\n'
            'done\n'
            'make test')
    commands = split_commands(text, 5)
    assert [c.text for c in commands] == [
        'python tools/a.py --x 1  # trailing',
        'for d in a b; do python tools/b.py $d; done', 'make test'
    ]
    assert [c.line for c in commands] == [6, 9, 12]


def test_a_placeholder_the_test_cannot_fill_fails_naming_it(new_root):
    root = new_root()
    runner = ReadmeRunner(root)
    block = _block('python tools/test.py configs/locat/'
                   'upernet_locat-b_ade20k.py CHECKPOINT')
    with pytest.raises(ReadmeError) as err:
        runner.run(block)
    assert str(err.value).startswith(
        'X.md:11 (block 1, command 1: python tools/test.py configs/locat/'
        'upernet_locat-b_ade20k.py CHECKPOINT): placeholder CHECKPOINT has '
        'no value')
    block = _block('python tools/model_converters/locat2mmlocat.py '
                   'my_own.safetensors checkpoints/x.pth')
    with pytest.raises(ReadmeError) as err:
        runner.run(block)
    message = str(err.value)
    assert message.startswith('X.md:11 (block 1, command 1: ')
    assert ("Arguments naming no file before the command: "
            "['my_own.safetensors', 'checkpoints/x.pth']") in message
    assert 'README placeholder the tests cannot fill' in message
    with pytest.raises(ReadmeError, match='make is not run by the README'):
        runner.run(_block('make demo'))


FAKE_README = '''# A tool

<!-- readme-test: skip: needs 8 GPUs -->
```shell
tools/dist_train.sh configs/x.py 8
```

Then test:

```shell
python tools/test.py configs/x.py work_dirs/x/epoch_1.pth
```

```
OMP_NUM_THREADS=1 python tools/y.py
```

```text
a log line
```
'''


def test_a_readme_with_an_unmarked_block_fails_the_check():
    blocks = parse_text(FAKE_README, 'FAKE.md')
    assert [b.line for b in blocks] == [4, 10, 14, 18]
    problems = [p for block in blocks for p in _check_block(block)]
    assert problems == [
        'FAKE.md block 2 (line 10) (shell) holds commands but has no '
        '<!-- readme-test: run TEST --> or <!-- readme-test: skip: REASON '
        '--> marker before its fence',
        'FAKE.md block 3 (line 14) (no language) holds commands but has no '
        '<!-- readme-test: run TEST --> or <!-- readme-test: skip: REASON '
        '--> marker before its fence'
    ]
    marked = FAKE_README.replace(
        'Then test:\n', 'Then test:\n<!-- readme-test: skip: a GPU -->')
    marked = marked.replace('\n```\nOMP', '\n<!-- readme-test: skip: x -->'
                            '\n```\nOMP')
    blocks = parse_text(marked, 'FAKE.md')
    assert not [p for block in blocks for p in _check_block(block)]


def test_check_clauses_compare_with_a_command_that_ran(new_root):
    """``check`` accepts a line of the run command's shape whose configs
    load and whose inputs are placeholders, and names what differs."""
    test_py = 'python tools/test.py configs/last/zeroshot_'
    block = _block('\n'.join([
        test_py + 'eva02-clip-b16_voc20.py x/eva02.pth',
        test_py + 'last-eva02-clip-b16_ade20k.py '
        'checkpoints/last-eva02-clip-b16_mmlocat.pth',
        test_py + 'eva02-clip-b16_nowhere.py x/eva02.pth',
        test_py + 'eva02-clip-b16_ade20k.py checkpoints/nothing.pth',
        test_py + 'eva02-clip-b16_ade20k.py x/eva02.pth --work-dir w',
    ]))
    runner = ReadmeRunner(new_root())
    # what running command 1 records: it read x/eva02.pth
    runner.ran[('X.md', 1, 1)] = [
        ('tools/test.py',
         ['configs/last/zeroshot_eva02-clip-b16_voc20.py',
          'x/eva02.pth'], {'x/eva02.pth'})
    ]
    assert runner.check(
        block, [2], like=(block, 1)) == [[
            'configs/last/zeroshot_last-eva02-clip-b16_ade20k.py',
            'checkpoints/last-eva02-clip-b16_mmlocat.pth'
        ]]
    with pytest.raises(FileNotFoundError, match='nowhere'):
        runner.check(block, [3], like=(block, 1))
    with pytest.raises(ReadmeError, match='input checkpoints/nothing.pth '):
        runner.check(block, [4], like=(block, 1))
    with pytest.raises(ReadmeError, match='not the shape of'):
        runner.check(block, [5], like=(block, 1))
    with pytest.raises(ReadmeError, match='was not run'):
        runner.check(block, [2], like=(block, 5))


def test_a_loop_expands_runs_for_some_values_and_checks_the_rest(new_root):
    """A README loop stands for one command per value (``$X`` and ``${X}``
    replaced, as the shell does); a test may run some values and check the
    others, and the loop counts as executed only once all were covered."""
    assert expand('for D in a b; do python tools/x.py ${D}_1.py $D; done') == [
        ('a', 'python tools/x.py a_1.py a'),
        ('b', 'python tools/x.py b_1.py b')
    ]
    assert expand('python tools/x.py $D') == [(None, 'python tools/x.py $D')]
    root = new_root()
    runner = ReadmeRunner(root)
    block = _block('for D in a b c; do mkdir -p out/${D}; done\n'
                   'for DATASET in voc20 ade20k; do python tools/test.py '
                   'configs/last/zeroshot_eva02-clip-b16_${DATASET}.py '
                   'x/eva02.pth; done\n'
                   'mkdir -p out/d')
    executed = {('X.md', 1, n)
                for n in (1, 2, 3)} & executed_by(current_test())
    assert not executed
    runner.run(block, lines=[1], values=['a', 'c'])
    assert sorted(os.listdir(root.abs('out'))) == ['a', 'c']
    assert ('X.md', 1, 1) not in executed_by(current_test())
    runner.run(block, lines=[1], values=['b'])
    assert ('X.md', 1, 1) in executed_by(current_test())
    with pytest.raises(ReadmeError, match=r"no loop over \['e'\]"):
        runner.run(block, lines=[1], values=['e'])
    with pytest.raises(ReadmeError, match='no loop over'):
        runner.run(block, lines=[3], values=['a'])
    # what running command 2 for voc20 records: it read x/eva02.pth
    runner.ran[('X.md', 1, 2)] = [
        ('tools/test.py',
         ['configs/last/zeroshot_eva02-clip-b16_voc20.py',
          'x/eva02.pth'], {'x/eva02.pth'})
    ]
    assert runner.check(
        block, [2], like=(block, 2)) == [
            ['configs/last/zeroshot_eva02-clip-b16_voc20.py', 'x/eva02.pth'],
            ['configs/last/zeroshot_eva02-clip-b16_ade20k.py', 'x/eva02.pth'],
        ]
    assert ('X.md', 1, 2) in executed_by(current_test())


# A newcomer reads the root README in five minutes; the rest is in docs/.
README_MAX_LINES = 250
# [text](target) and ![alt](target), with an optional "title".
MD_LINK = re.compile(r'!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')
FENCED = re.compile(r'^\s*(```|~~~).*?^\s*\1\s*$', re.S | re.M)


def _read(path: str) -> str:
    with open(osp.join(REPO, path), encoding='utf-8') as f:
        return f.read()


def link_problems(path: str, text: str) -> list:
    """The links of Markdown ``text`` (the file ``path``, relative to the
    repository) whose file or heading does not exist."""

    def target_text(dest: str) -> str:
        return text if dest == path else _read(dest)

    problems = []
    prose = FENCED.sub('', text)
    for target in MD_LINK.findall(prose):
        if re.match(r'^[a-z][a-z0-9+.-]*:', target):  # http:, mailto:
            continue
        file, _, anchor = target.partition('#')
        dest = osp.normpath(osp.join(osp.dirname(path), file)) if file \
            else path
        where = f'{path}: link ({target})'
        if file and not osp.exists(osp.join(REPO, dest)):
            problems.append(f'{where}: {dest} does not exist')
            continue
        if anchor:
            if not dest.endswith('.md'):
                problems.append(f'{where}: #{anchor} in a file that is not '
                                'Markdown')
            elif anchor not in heading_anchors(target_text(dest)):
                problems.append(f'{where}: {dest} has no heading whose '
                                f'anchor is #{anchor}')
    return problems


def test_every_relative_link_leads_to_a_file_and_heading():
    files = doc_files()
    assert 'README.md' in files and 'docs/reliability.md' in files
    problems = [p for path in files for p in link_problems(path, _read(path))]
    assert not problems, '\n'.join(problems)


def test_the_link_check_finds_missing_files_and_headings():
    text = (
        '# Title\n\n## Two words\n\n[ok](#two-words) [up](../LICENSE) '
        '[web](https://example.org/x) ![pic](docs/nothing.png)\n'
        '[gone](#no-such-heading) [other](docs/architecture.md#not-there)\n'
        '```shell\n[in a block](nowhere.md)\n```\n')
    assert link_problems('configs/X.md', text) == [
        'configs/X.md: link (docs/nothing.png): configs/docs/nothing.png '
        'does not exist',
        'configs/X.md: link (#no-such-heading): configs/X.md has no heading '
        'whose anchor is #no-such-heading',
        'configs/X.md: link (docs/architecture.md#not-there): configs/docs/'
        'architecture.md does not exist',
    ]
    assert link_problems('X.md', '[m](docs/method.md#lazystrike)') == []
    assert link_problems('X.md', '[m](docs/architecture.md#not-there)') == [
        'X.md: link (docs/architecture.md#not-there): docs/architecture.md '
        'has no heading whose anchor is #not-there'
    ]


def test_the_root_readme_is_short():
    lines = _read('README.md').count('\n')
    assert lines < README_MAX_LINES, (
        f'README.md has {lines} lines (limit {README_MAX_LINES}): a '
        'newcomer reads it in five minutes; move the details to a docs/ '
        'page and link it')
