"""A generated ADE20K set read through the shipped ADE20K config, for the
data-check tests."""
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


def ade_file(root: str, kind: str, index: int, split: str = 'train') -> str:
    """Image (``kind='img'``) or label PNG (``'ann'``) number ``index``
    (1-based, as ADE20K names them) of ``split``."""
    sub, ext = ('images', 'jpg') if kind == 'img' else ('annotations', 'png')
    folder = 'training' if split == 'train' else 'validation'
    return osp.join(root, sub, folder, f'ADE_{split}_{index:08d}.{ext}')
