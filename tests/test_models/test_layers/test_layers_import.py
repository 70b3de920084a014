"""The pure-torch layers import and run with every OpenMMLab host blocked,
and GAug's modules import one way (bias <- dispatch <- kernels)."""
import subprocess
import sys
import textwrap

from helpers.import_graph import find_cycle, import_graph, module_imports

BLOCKED = ('mmcv', 'mmpretrain', 'mmseg', 'mmdet')

IMPORT_BLOCKED = textwrap.dedent("""
    import sys
    blocked = sys.argv[1].split(',')
    for name in blocked:
        sys.modules[name] = None  # `import name` raises ImportError
    import torch
    import mmlocat.models.layers as layers
    gaug = layers.GaussianAugment(8, (2, 2))
    q = torch.randn(1, 2, 5, 8)
    dense = layers.gaug_attention(q, q, q, gaug, (2, 2), impl='dense')
    chunked = layers.gaug_attention(q, q, q, gaug, (2, 2), impl='chunked')
    assert torch.allclose(dense, chunked, atol=1e-6)
    pooled = layers.LazyStrikePool()(torch.randn(1, 4, 8)).pooled
    loaded = sorted(m for m in sys.modules
                    if m.split('.')[0] in blocked and sys.modules[m])
    print(tuple(pooled.shape), loaded)
""")


def test_layers_import_without_hosts(subprocess_env):
    proc = subprocess.run(
        [sys.executable, '-c', IMPORT_BLOCKED, ','.join(BLOCKED)],
        capture_output=True,
        text=True,
        env=subprocess_env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ['(1,', '8)', '[]']


def test_blocking_is_effective(subprocess_env):
    """The blocker really blocks: the backbones do need a host."""
    code = IMPORT_BLOCKED.replace('mmlocat.models.layers',
                                  'mmlocat.models.backbones')
    proc = subprocess.run([sys.executable, '-c', code, 'mmpretrain'],
                          capture_output=True,
                          text=True,
                          env=subprocess_env)
    assert proc.returncode != 0
    assert 'ModuleNotFoundError' in proc.stderr or 'ImportError' in \
        proc.stderr


def test_gaug_imports_run_one_way():
    pkg = 'mmlocat.models.layers.gaug'
    ours = {
        name: sorted(d for d in deps if d.startswith('mmlocat'))
        for name, deps in module_imports(pkg).items()
    }
    assert ours[f'{pkg}.bias'] == []
    assert ours[f'{pkg}._blocks'] == []
    assert ours[f'{pkg}.flex'] == []
    assert ours[f'{pkg}.chunked'] == [f'{pkg}._blocks']
    assert ours[f'{pkg}.dispatch'] == [
        f'{pkg}.bias', f'{pkg}.chunked', f'{pkg}.flex'
    ]


def test_no_import_cycle_in_mmlocat():
    graph = import_graph('mmlocat')
    assert 'mmlocat.models.layers.gaug.bias' in graph
    assert find_cycle(graph) is None, find_cycle(graph)
    # The check finds a cycle where there is one.
    graph['mmlocat.models.layers.gaug.bias'].add(
        'mmlocat.models.layers.gaug.dispatch')
    assert find_cycle(graph) == [
        'mmlocat.models.layers.gaug.bias',
        'mmlocat.models.layers.gaug.dispatch',
        'mmlocat.models.layers.gaug.bias'
    ]


def test_no_import_cycle_through_function_level_imports():
    """Imports inside functions are edges too (issue 34 found
    ``mmlocat.text.class_names -> mmlocat.datasets.imagenet_class_names ->
    mmlocat.text.class_names`` that way)."""
    graph = import_graph('mmlocat', lazy=True)
    assert find_cycle(graph) is None, find_cycle(graph)
    # the lazy graph holds the function-level edges the plain one lacks
    # (text reads a caption file's bytes with the datasets' decoder)
    assert 'mmlocat.datasets.captions' in graph['mmlocat.text.class_names']
    assert 'mmlocat.datasets.captions' not in import_graph(
        'mmlocat')['mmlocat.text.class_names']
