"""The registry node: cheap import, lazy locations, builds from all hosts."""
import subprocess
import sys
import textwrap

import pytest

TINY_LOCAT = ("dict(type='mmlocat.LocAtViT', arch=dict(embed_dims=32, "
              'num_layers=1, num_heads=2, feedforward_channels=64), '
              "img_size=32, patch_size=16, out_type='featmap')")

# What a user's existing host config looks like after adding mmlocat.
USER_CONFIG = """
custom_imports = dict(imports=['mmlocat'], allow_failed_imports=False)
default_scope = '{scope}'
model = dict(backbone={backbone})
"""

BUILD_FROM_HOST = """
import sys
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope
assert 'mmlocat' not in sys.modules
cfg = Config.fromfile(sys.argv[1])  # runs custom_imports
init_default_scope(cfg.default_scope)
from {scope}.registry import MODELS
backbone = MODELS.build(cfg.model.backbone)
out = backbone(torch.rand(1, 3, 32, 48))
print(type(backbone).__module__, type(backbone).__name__,
      tuple(out[-1].shape))
"""


def _run(code: str, *args, env=None) -> str:
    proc = subprocess.run([sys.executable, '-c', code, *args],
                          capture_output=True,
                          text=True,
                          env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.parametrize('scope', ['mmpretrain', 'mmseg', 'mmdet'])
@pytest.mark.slow
def test_user_config_builds_mmlocat_backbone(scope, tmp_path, subprocess_env):
    config = tmp_path / f'{scope}_user_config.py'
    config.write_text(USER_CONFIG.format(scope=scope, backbone=TINY_LOCAT))
    out = _run(
        BUILD_FROM_HOST.format(scope=scope), str(config), env=subprocess_env)
    module, name, shape = out.split(maxsplit=2)
    assert module.startswith('mmlocat.models.')
    assert name == 'LocAtViT'
    assert shape.strip() == '(1, 32, 2, 3)'


def test_import_is_cheap(subprocess_env):
    code = textwrap.dedent("""
        import sys
        import mmlocat
        heavy = [m for m in ('mmseg', 'mmdet', 'mmpretrain', 'mmcv.ops',
                             'mmlocat.models') if m in sys.modules]
        print(heavy)
    """)
    assert _run(code, env=subprocess_env).strip() == '[]'


def test_works_without_mmseg_and_mmdet(subprocess_env):
    code = textwrap.dedent(f"""
        import sys
        sys.modules['mmseg'] = None  # makes `import mmseg` fail
        sys.modules['mmdet'] = None
        import mmlocat
        from mmpretrain.registry import MODELS
        model = MODELS.build({TINY_LOCAT})
        from mmengine.registry import METRICS
        metric = METRICS.build(dict(type='mmlocat.PointInBox'))
        print(type(model).__name__, type(metric).__name__)
    """)
    assert _run(code, env=subprocess_env).split() == ['LocAtViT', 'PointInBox']


def test_registry_scopes():
    import mmlocat
    from mmlocat import registry
    for name in registry.__all__:
        child = getattr(registry, name)
        assert child.scope == 'mmlocat'
        assert child.parent is not None and child.parent.scope == 'mmengine'
        assert child.parent._children['mmlocat'] is child
    assert mmlocat.MODELS is registry.MODELS
