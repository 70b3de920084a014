"""README "Using mmlocat from your own configs" works as written.

The snippet is cut out of README.md (the block after the heading, parsed
when the test runs), appended to a host base config
(mmdet RetinaNet) exactly as a user pastes it, and built with the host's
registry. Its relative ``checkpoint`` path gets what the README's converter
command writes: a plain timm ViT-B (random init) through
``convert_vit_to_locat`` / ``save_checkpoint`` (the code of
``tools/model_converters/locat2mmlocat.py``). ``init_weights`` must load every
backbone tensor (GAug starts fresh from a plain ViT); the same snippet
without ``prefix='backbone.'`` must refuse, naming the fix.
"""
import os
import os.path as osp
import re

import pytest
import timm
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope
from readme_blocks import find_block
from readme_runner import take

from mmlocat.utils.checkpoint_io import save_checkpoint
from mmlocat.utils.converters import convert_vit_to_locat

HOST_BASE = 'mmdet::_base_/models/retinanet_r50_fpn.py'


def readme_snippet() -> str:
    return take(
        find_block('README.md', "type='mmlocat.LocAtViT',\n        arch='b'"))


def _build(config_text: str, path: str):
    with open(path, 'w') as f:
        f.write(config_text)
    cfg = Config.fromfile(path)
    init_default_scope('mmdet')
    from mmdet.registry import MODELS
    return MODELS.build(cfg.model)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_readme_snippet_loads_a_converted_checkpoint(tmp_path, monkeypatch):
    snippet = readme_snippet()
    checkpoint = re.search(r"checkpoint='([^']+)'", snippet).group(1)
    assert "prefix='backbone.'" in snippet
    monkeypatch.chdir(tmp_path)  # the snippet's path is relative
    torch.manual_seed(0)
    timm_vit = timm.create_model('vit_base_patch16_224', pretrained=False)
    os.makedirs(osp.dirname(checkpoint) or '.', exist_ok=True)
    save_checkpoint(convert_vit_to_locat(timm_vit.state_dict()), checkpoint)
    del timm_vit

    config = f'_base_ = {HOST_BASE!r}\n{snippet}'
    detector = _build(config, str(tmp_path / 'my_retinanet.py'))
    backbone = detector.backbone
    assert type(backbone).__name__ == 'LocAtViT'
    detector.init_weights()
    saved = torch.load(checkpoint, weights_only=True)['state_dict']
    loaded = 0
    for key, value in backbone.state_dict().items():
        if 'attn.gaug.' in key:
            assert 'backbone.' + key not in saved
            continue
        torch.testing.assert_close(value, saved['backbone.' + key])
        loaded += 1
    assert loaded == len([k
                          for k in saved if k.startswith('backbone.')]) == 150

    # the old snippet (no prefix) used to train a random backbone
    no_prefix = config.replace("prefix='backbone.'", '')
    detector = _build(no_prefix, str(tmp_path / 'old_snippet.py'))
    with pytest.raises(ValueError, match=r"add prefix='backbone\.'"):
        detector.init_weights()
