"""``docs/method.md`` is the one reference the code cites for its math.

Every ``docs/method.md#<anchor>`` cited in the repository (docstrings,
comments, configs, markdown links) must name a heading of that page, and
no file may cite the design documents that live outside the repository.
"""
import os
import os.path as osp
import re
from typing import Dict, Iterator, List, Set, Tuple

import pytest

REPO = osp.dirname(osp.dirname(osp.abspath(__file__)))
METHOD = 'docs/method.md'
SCANNED = ('mmlocat', 'configs', 'tests', 'tools', 'docs', 'README.md',
           'CONTRIBUTING.md')
TEXT_SUFFIXES = ('.py', '.md', '.yml', '.yaml', '.txt', '.cfg', '.sh')
# This file spells the patterns it looks for.
SELF = osp.relpath(osp.abspath(__file__), REPO)

# A citation of the page from anywhere: a repository-root path. Anchors
# hold only word characters and '-' (an empty one is reported as broken).
ROOT_CITATION = re.compile(r'docs/method\.md#([\w-]*)')
# A markdown link to the page, relative to the linking file (or '#x' within
# the page itself).
MD_LINK = re.compile(r'\]\(([^)\s#]*)#([^)\s]*)\)')
# The external design documents (``spec/*.md`` beside the repository) and the
# phrasings that cite them.
SPEC_CITATION = re.compile(
    r'\bspec/|\b(?:locat|lastvit|ov-detection)\.md\b|\bthe\s+spec\b'
    r'|\bspec\s+(?:§|section)', re.IGNORECASE)

Citation = Tuple[str, int, str]  # (file, line, anchor)


def github_anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, characters other than
    letters, digits, ``_``, ``-`` and spaces dropped, spaces to ``-``."""
    text = re.sub(r'[^\w\- ]', '', heading.strip().lower())
    return text.replace(' ', '-')


def heading_anchors(markdown: str) -> List[str]:
    """Anchors of the ATX headings outside fenced code blocks, in order."""
    anchors, fenced = [], False
    for line in markdown.splitlines():
        if line.lstrip().startswith(('```', '~~~')):
            fenced = not fenced
            continue
        match = re.match(r'#{1,6}\s+(.*?)\s*#*\s*$', line)
        if match and not fenced:
            anchors.append(github_anchor(match.group(1)))
    return anchors


def scanned_files() -> Iterator[str]:
    """Repository-relative paths of the text files under ``SCANNED``."""
    for entry in SCANNED:
        path = osp.join(REPO, entry)
        if osp.isfile(path):
            yield entry
            continue
        for root, dirs, files in os.walk(path):
            dirs[:] = [d for d in dirs if d != '__pycache__']
            for name in sorted(files):
                if name.endswith(TEXT_SUFFIXES):
                    yield osp.relpath(osp.join(root, name), REPO)


def read(rel: str) -> str:
    with open(osp.join(REPO, rel), encoding='utf-8') as f:
        return f.read()


def spec_citations(rel: str, text: str) -> List[str]:
    """``file:line: text`` of every citation of the external documents
    (a phrase may wrap over two lines)."""
    lines = text.splitlines()
    numbers = sorted({
        text.count('\n', 0, match.start()) + 1
        for match in SPEC_CITATION.finditer(text)
    })
    return [f'{rel}:{n}: {lines[n - 1].strip()}' for n in numbers]


def method_citations(rel: str, text: str) -> List[Citation]:
    """Every citation of ``docs/method.md`` in one file."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        found += [(rel, number, m.group(1))
                  for m in ROOT_CITATION.finditer(line)]
        if not rel.endswith('.md'):
            continue
        for target, anchor in MD_LINK.findall(line):
            page = rel if not target else osp.normpath(
                osp.join(osp.dirname(rel), target))
            if page == METHOD:
                found.append((rel, number, anchor))
    return found


@pytest.fixture(scope='module')
def anchors() -> Set[str]:
    return set(heading_anchors(read(METHOD)))


@pytest.fixture(scope='module')
def texts() -> Dict[str, str]:
    return {rel: read(rel) for rel in scanned_files() if rel != SELF}


@pytest.mark.parametrize('heading, anchor', [
    ('GAug: Gaussian locality bias', 'gaug-gaussian-locality-bias'),
    ('Point-in-Box (PiB)', 'point-in-box-pib'),
    ('F-ViT open-vocabulary head', 'f-vit-open-vocabulary-head'),
    ('ImageNet-1k classification recipe', 'imagenet-1k-classification-recipe'),
    ('`PRR` and *GAP*', 'prr-and-gap'),
])
def test_github_anchor_rule(heading, anchor):
    assert github_anchor(heading) == anchor


def test_headings_have_distinct_anchors():
    """No anchor depends on GitHub's ``-1`` suffix of a repeated heading."""
    found = heading_anchors(read(METHOD))
    assert len(found) == len(set(found)), sorted(
        a for a in set(found) if found.count(a) > 1)


def test_every_cited_anchor_is_a_heading(anchors, texts):
    citations = [
        c for rel, text in texts.items() for c in method_citations(rel, text)
    ]
    # The scan must see the page's users (the code's docstrings, configs,
    # the architecture page and the page's own table of contents).
    citing = {rel for rel, _, _ in citations}
    for rel in ('mmlocat/models/layers/lazy_strike.py', 'docs/architecture.md',
                METHOD, 'configs/_base_/seg/probe_model.py'):
        assert rel in citing, rel
    broken = [
        f'{rel}:{line}: #{anchor}' for rel, line, anchor in citations
        if anchor not in anchors
    ]
    assert not broken, ('cited anchors that are no heading of '
                        f'{METHOD}:\n' + '\n'.join(broken))


def test_no_citation_of_documents_outside_the_repository(texts):
    cited = [
        c for rel, text in texts.items() for c in spec_citations(rel, text)
    ]
    assert not cited, (f'cite {METHOD}#<anchor> instead of the external '
                       'design documents:\n' + '\n'.join(cited))
