"""Every shipped config starts from the checkpoint its README makes.

For each config leaf that names a checkpoint (a backbone's ``Pretrained``
``init_cfg``, mmseg's ``pretrained``, a text tower's ``weights``,
``load_from``), the file is made as the config family's README says
(:data:`checkpoint_makers.MAKERS`: the real converter tool on a random-init
source model of the named kind, or a training checkpoint of the named
recipe), the config's model is built (shrunk to a tiny width, everything
else as shipped) and ``init_weights()`` runs: the strict loader must accept
the file, and every tower tensor the file holds must be loaded. Made files
are shared by all configs of the module.
"""
import pytest
from checkpoint_makers import (MAKERS, Made, checkpoint_refs, load_config,
                               loaded_from, missing_maker_message,
                               prepare_model, readme_test_commands,
                               shipped_configs)

from mmlocat.utils.pretrained import load_model_weights

CONFIGS = shipped_configs()
TEST_COMMANDS = readme_test_commands()


@pytest.fixture(scope='module')
def made(tmp_path_factory):
    return Made(str(tmp_path_factory.mktemp('made')))


@pytest.mark.slow
def test_every_named_checkpoint_has_a_maker():
    """The table is complete: a new config's checkpoint needs a maker."""
    missing, covered, files = {}, [], set()
    for config in CONFIGS:
        refs = checkpoint_refs(load_config(config))
        unknown = sorted({p for _, p in refs if p not in MAKERS})
        if unknown:
            missing[config] = unknown
        elif refs:
            covered.append(config)
            files.update(p for _, p in refs)
    assert not missing, '\n'.join(
        missing_maker_message(c, n) for c, n in missing.items())
    print(f'{len(covered)} of {len(CONFIGS)} configs name checkpoints '
          f'({len(files)} files); {len(TEST_COMMANDS)} README test commands')


@pytest.mark.parametrize('config', CONFIGS)
@pytest.mark.slow
def test_config_loads_the_checkpoint_its_readme_makes(config, made,
                                                      monkeypatch):
    cfg = load_config(config)
    refs = checkpoint_refs(cfg)
    if not refs:
        pytest.skip('names no checkpoint (trained from scratch, or tested '
                    'with one given to tools/test.py)')
    unknown = sorted({p for _, p in refs if p not in MAKERS})
    assert not unknown, missing_maker_message(config, unknown)
    monkeypatch.chdir(made.root)  # the configs' relative paths
    model = prepare_model(cfg, made)
    model.init_weights()
    assert loaded_from(model, cfg) or cfg.get('load_from')
    if cfg.get('load_from'):
        load_model_weights(model, cfg.load_from)  # strict


@pytest.mark.parametrize('readme, config, checkpoint', TEST_COMMANDS)
@pytest.mark.slow
def test_readme_test_command_accepts_its_checkpoint(readme, config, checkpoint,
                                                    made, monkeypatch):
    """``python tools/test.py CONFIG checkpoints/X`` as a README writes it:
    the model the Runner builds (no ``init_weights`` in a test run) must be
    covered by the made ``X`` (``load_model_weights``, strict, what
    ``tools/test.py`` loads it with)."""
    assert checkpoint in MAKERS, missing_maker_message(
        f'{readme} (tools/test.py {config})', [checkpoint])
    monkeypatch.chdir(made.root)
    model = prepare_model(load_config(config), made)
    load_model_weights(model, made.get(checkpoint))  # raises unless covered
