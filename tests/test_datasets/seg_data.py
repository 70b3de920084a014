"""The shipped ADE20K config on a generated set, for the data-check
tests."""
import os.path as osp

from mmengine.config import Config

ADE_CONFIG = 'configs/locat/upernet_locat-t_ade20k.py'


def ade_config(repo_root: str, data_root: str) -> Config:
    """The shipped ADE20K config with every dataloader on ``data_root``."""
    cfg = Config.fromfile(osp.join(repo_root, ADE_CONFIG))
    cfg.merge_from_dict({
        f'{split}_dataloader.dataset.data_root': data_root
        for split in ('train', 'val', 'test')
    })
    return cfg
