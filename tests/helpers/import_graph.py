"""The module-level import graph of an installed package, from its AST.

For tests that pin import direction and the absence of import cycles
without importing anything. By default imports inside functions (lazy by
design) and under ``if TYPE_CHECKING:`` are not edges; module-level ``if``
/ ``try`` blocks are. With ``lazy=True`` every import statement is an edge,
wherever it is (a cycle through a function-level import is a cycle of the
design, even when Python runs it).
"""
import ast
import importlib.util
import os
import os.path as osp
from typing import Dict, Iterator, List, Optional, Set

__all__ = ['module_imports', 'import_graph', 'find_cycle']


def _module_files(package: str) -> Dict[str, str]:
    """Module name -> source file, found on disk (nothing is imported)."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f'no package {package!r}')
    files = {package: spec.origin}
    if not spec.submodule_search_locations:
        return files
    root = osp.dirname(spec.origin)
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(
            d for d in dirs if osp.isfile(osp.join(folder, d, '__init__.py')))
        rel = osp.relpath(folder, root)
        prefix = package if rel == '.' else '.'.join([package] +
                                                     rel.split(osp.sep))
        for name in names:
            if not name.endswith('.py'):
                continue
            path = osp.join(folder, name)
            stem = name[:-3]
            files[prefix if stem == '__init__' else f'{prefix}.{stem}'] = path
    return files


def _top_level(body: List[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements run at import time (not in functions / classes)."""
    for node in body:
        if isinstance(node, ast.If):
            test = node.test
            name = getattr(test, 'id', getattr(test, 'attr', None))
            if name == 'TYPE_CHECKING':
                yield from _top_level(node.orelse)
                continue
            yield from _top_level(node.body)
            yield from _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody,
                          *(h.body for h in node.handlers)):
                yield from _top_level(block)
        elif isinstance(node, ast.With):
            yield from _top_level(node.body)
        else:
            yield node


def _targets(node: ast.stmt, module: str, is_pkg: bool,
             known: Set[str]) -> Iterator[str]:
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            parts = module.split('.')
            base = parts if is_pkg else parts[:-1]
            base = base[:len(base) - node.level + 1]
            source = '.'.join(base + ([node.module] if node.module else []))
        else:
            source = node.module
        for alias in node.names:
            sub = f'{source}.{alias.name}'
            # ``from pkg import submodule`` depends on the submodule.
            yield sub if sub in known else source


def module_imports(package: str, lazy: bool = False) -> Dict[str, Set[str]]:
    """Every module of ``package`` -> the modules it imports at load time
    (absolute names, any package); with ``lazy``, also those it imports
    inside functions and classes and under ``if TYPE_CHECKING:``."""
    files = _module_files(package)
    result = {}
    for name, path in files.items():
        with open(path, encoding='utf-8') as f:
            tree = ast.parse(f.read(), path)
        is_pkg = path.endswith('__init__.py')
        nodes = ast.walk(tree) if lazy else _top_level(tree.body)
        result[name] = {
            target
            for node in nodes
            for target in _targets(node, name, is_pkg, set(files))
        }
    return result


def import_graph(package: str, lazy: bool = False) -> Dict[str, Set[str]]:
    """:func:`module_imports` restricted to edges inside ``package``."""
    graph = module_imports(package, lazy)
    return {
        name: {d
               for d in deps if d in graph and d != name}
        for name, deps in graph.items()
    }


def find_cycle(graph: Dict[str, Set[str]]) -> Optional[List[str]]:
    """One import cycle ``[a, b, ..., a]`` of ``graph``, or ``None``."""
    state = {}

    def visit(node: str, path: List[str]) -> Optional[List[str]]:
        state[node] = 'open'
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 'open':
                return path[path.index(dep):] + [dep]
            if dep not in state:
                cycle = visit(dep, path + [dep])
                if cycle:
                    return cycle
        state[node] = 'done'
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node, [node])
            if cycle:
                return cycle
    return None
