"""load_config: yapf formatting of the tools' config text is optional and
the unformatted dump is the same loadable config."""
import os.path as osp

import pytest
from mmengine.config import Config

from mmlocat.utils.launch import FORMAT_ENV, load_config

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
# an mmseg-based and an mmdet-based shipped config (bases, custom_imports)
CONFIGS = ('configs/locat/upernet_locat-b_ade20k.py',
           'configs/ovd/fvit_clip-b16_ov-coco.py')


@pytest.mark.parametrize('config', CONFIGS)
def test_unformatted_dump_loads_as_the_same_config(config, tmp_path,
                                                   monkeypatch):
    path = osp.join(REPO, config)
    reference = Config.fromfile(path)
    monkeypatch.setenv(FORMAT_ENV, '0')
    fast = load_config(path)
    assert fast.to_dict() == reference.to_dict()
    assert fast.filename == reference.filename
    assert fast.text == reference.text
    # not the yapf text: mmengine's raw layout, one entry per line
    assert fast.pretty_text != reference.pretty_text
    dumped = tmp_path / 'dumped.py'
    fast.dump(str(dumped))
    assert Config.fromfile(str(dumped)).to_dict() == reference.to_dict()


def test_formatting_is_the_default(tmp_path, monkeypatch):
    path = tmp_path / 'small.py'
    path.write_text("model = dict(type='X', layers=[dict(a=1), dict(b=2)])\n")
    formatted = Config.fromfile(str(path)).pretty_text
    monkeypatch.delenv(FORMAT_ENV, raising=False)
    assert load_config(str(path)).pretty_text == formatted
    monkeypatch.setenv(FORMAT_ENV, '1')
    assert load_config(str(path)).pretty_text == formatted
    monkeypatch.setenv(FORMAT_ENV, '0')
    assert load_config(str(path)).pretty_text != formatted


def test_bad_value_is_named(monkeypatch):
    monkeypatch.setenv(FORMAT_ENV, 'no')
    with pytest.raises(
            ValueError, match="MMLOCAT_FORMAT_CONFIG must be 0 "
            "or 1, got 'no'"):
        load_config(osp.join(REPO, CONFIGS[0]))
