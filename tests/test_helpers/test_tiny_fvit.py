import os.path as osp

import pytest
from helpers import fvit


def test_tiny_cfg_is_the_shipped_model_at_tiny_size(tmp_path, repo_root):
    emb = fvit.write_embeddings(tmp_path / 'emb.npy', ['a', 'b'])
    cfg = fvit.tiny_fvit_cfg(emb, ['a', 'b'], with_mask=True)
    assert fvit.REPO == repo_root
    assert cfg['type'] == 'mmlocat.FViT'
    assert cfg['backbone']['arch'] == fvit.TINY_ARCH
    assert cfg['roi_head']['bbox_head']['class_names'] == ['a', 'b']
    assert cfg['roi_head']['mask_head']['num_classes'] == 2


def test_missing_configs_folder_is_a_clear_error(tmp_path):
    assert osp.isfile(fvit.shipped_config_path(fvit.SHIPPED_MODEL))
    with pytest.raises(
            FileNotFoundError,
            match=r'shipped config .*fvit_clip-b16\.py.*checkout'):
        fvit.shipped_config_path(fvit.SHIPPED_MODEL, repo=str(tmp_path))
