"""What the README tests put where a README names a file the user has.

A README command runs in a *user root* (:class:`UserRoot`), a fresh folder
that looks like the user's working directory: ``configs/``, ``tools/`` and
``docs/`` of the repository (linked), the tiny datasets of
:func:`make_data` under ``data/`` in the layouts the configs read, and the
files below, each made when a command first names it. The table is the
one place that says what stands for what; a README command naming an input
that is in none of them fails, naming the file, block and token.

=================================================  ==========================
README names                                       the test makes (random
                                                   init, tiny: tiny_models)
=================================================  ==========================
``ViT-B-16.pt``, ``checkpoints/ViT-B-16.pt``,      OpenAI's TorchScript
``checkpoints/ViT-L-14.pt``                        release (QuickGELU)
``checkpoints/ViT-B-16.bin``                       open_clip state dict,
                                                   ``ViT-B-16`` (LAION, GELU)
``checkpoints/b16_fullcc2.5b.pt``, ``l14_...``     open_clip state dict,
                                                   MetaCLIP (QuickGELU)
``EVA02_CLIP_B_psz16_s8B.pt`` and                  one EVA02-CLIP B/16 in the
``checkpoints/open_clip_EVA02-B-16.bin``           EVA repo's and open_clip's
                                                   layouts (same weights)
``EVA02_CLIP_L_336_psz14_s6B.pt`` and              the same, L/14-336
``checkpoints/open_clip_EVA02-L-14-336.bin``
``locatvit_{tiny,base}.safetensors``               timm DeiT-T / ViT-B with
                                                   GAug, safetensors
``last_vit_b16.pth``, ``ViT_190k.pth``             torchvision ``vit_b_16``
``dino_deitsmall16_pretrain.pth``                  DINO's ViT-S/16 backbone
``dino0080.pth``                                   a DINO training checkpoint
``F-ViT/datasets/embeddings/*_evaclip_vitb_16.pt`` CLIPSelf's embedding dicts
``F-ViT/datasets/mscoco_65_classes.json``          its 65 OV-COCO class names
``fvit_eva_vitb16_ovcoco_clipself_proposals.pth``  CLIPSelf's F-ViT (mmdet 2)
``photo.jpg``, ``photos/``, ``big_photos/``        generated images
``coco_20k_filenames.txt``                         the tiny COCO's LOST list
``data/...``                                       :func:`make_data`
``checkpoints/X`` of :data:`TRAINED`               checkpoint_makers.MAKERS
                                                   (a README says to train or
                                                   convert your own)
``work_dirs/...``, ``locat-b.pth``, ...            a training checkpoint of
                                                   the recipe (:data:`RUNS`)
``CHECKPOINT``, ``RUN``, ``CONFIG`` ...            given by the test (subs)
=================================================  ==========================
"""
import json
import os
import os.path as osp
import shutil
from typing import Callable, Dict, List, Optional

import numpy as np
import release_formats as rf
from checkpoint_makers import MAKERS, Made, load_config, trained
from helpers.shrink import shrink_model

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
# Folders of the repository a user's working directory has.
LINKED = ('configs', 'tools', 'docs')

Maker = Callable[['UserRoot', str], None]


# -------------------------------------------------------------------- data
def _image(path: str, height: int, width: int, seed: int) -> None:
    import cv2
    rng = np.random.default_rng(seed)
    img = np.zeros((height, width, 3), np.uint8) + rng.integers(0, 255, 3)
    for _ in range(3):
        y, x = rng.integers(0, height // 2), rng.integers(0, width // 2)
        img[y:y + height // 3, x:x + width // 3] = rng.integers(0, 255, 3)
    os.makedirs(osp.dirname(path), exist_ok=True)
    cv2.imwrite(path, img)


# (kind, generate options, the generated folder (relative to the data root
# generate returns, '' = itself), where it goes under data/)
DATASETS = [
    ('ade20k', {}, '', 'ade/ADEChallengeData2016'),
    ('coco_stuff', {}, '', 'coco_stuff164k'),
    ('pascal_context', {}, '', 'VOCdevkit/VOC2010'),
    ('pascal_voc', dict(year=2012), '', 'VOCdevkit/VOC2012'),
    ('pascal_voc', dict(year=2007), '', 'VOCdevkit/VOC2007'),
    ('cityscapes', {}, '', 'cityscapes'),
    ('coco', {}, '', 'coco'),
    ('lvis', {}, '', 'lvis_v1'),
    ('imagenet', dict(num_classes=4), '', 'imagenet'),
]


def make_data(dest: str, scratch: str) -> None:
    """The tiny datasets in the configs' layouts under ``dest/data``
    (``mmlocat.testing.generate``; each kind in its own scratch folder,
    then moved where the configs read it)."""
    from mmlocat.testing import generate
    for i, (kind, options, sub, target) in enumerate(DATASETS):
        paths = generate(kind, osp.join(scratch, f'{i}_{kind}'), 2, 2,
                         (48, 64), **options)
        src = osp.join(paths['data_root'], sub)
        dst = osp.join(dest, 'data', target)
        os.makedirs(osp.dirname(dst), exist_ok=True)
        shutil.move(src, dst)
    _coco2014(osp.join(dest, 'data', 'coco'))


def _coco2014(coco: str) -> None:
    """COCO train2014 for COCO20k: the tiny train2017 images under their
    2014 names and an ``instances_train2014.json`` naming them."""
    with open(osp.join(coco, 'annotations', 'instances_train2017.json')) as f:
        data = json.load(f)
    os.makedirs(osp.join(coco, 'train2014'), exist_ok=True)
    for image in data['images']:
        name = f'COCO_train2014_{image["id"]:012d}.jpg'
        shutil.copy(
            osp.join(coco, 'train2017', image['file_name']),
            osp.join(coco, 'train2014', name))
        image['file_name'] = name
    with open(osp.join(coco, 'annotations', 'instances_train2014.json'),
              'w') as f:
        json.dump(data, f)


# ------------------------------------------------------------ placeholders
def _eva_pair(repo_name: str, open_clip_name: str, model: str) -> Maker:

    def make(root: 'UserRoot', path: str) -> None:
        rf.eva_clip_pair(
            root.abs(repo_name), root.abs(open_clip_name), model_name=model)

    return make


def _images(names: List[str], height: int = 96, width: int = 128) -> Maker:

    def make(root: 'UserRoot', path: str) -> None:
        for i, name in enumerate(names):
            _image(osp.join(path, name), height, width, seed=i)

    return make


def _coco20k_list(root: 'UserRoot', path: str) -> None:
    with open(root.abs('data/coco/annotations/instances_train2014.json')) as f:
        images = json.load(f)['images']
    with open(path, 'w') as f:
        f.writelines(f'train2014/{i["file_name"]}\n' for i in images)


def _clipself_embeddings(names: Callable[['UserRoot'], List[str]],
                         seed: int) -> Maker:

    def make(root: 'UserRoot', path: str) -> None:
        rf.clipself_embeddings(path, names(root), dims=512, seed=seed)

    return make


def _coco80(root: 'UserRoot') -> List[str]:
    from mmdet.datasets import CocoDataset
    return list(CocoDataset.METAINFO['classes'])


def _lvis_names(root: 'UserRoot') -> List[str]:
    from mmlocat.text import read_class_names
    return read_class_names(
        root.abs('data/lvis_v1/annotations/lvis_v1_val.json'))


OV_COCO_CONFIG = 'configs/ovd/fvit_eva02-clip-b16_ov-coco.py'


def _ov_coco_classes(root: 'UserRoot', path: str) -> None:
    names = list(load_config(OV_COCO_CONFIG).all_classes)
    with open(path, 'w') as f:
        json.dump(names, f)


def _clipself_detector(root: 'UserRoot', path: str) -> None:
    """CLIPSelf's F-ViT for the tiny OV-COCO config, its head holding the
    rows of CLIPSelf's COCO embedding file for the 65 classes."""
    import torch
    cfg = load_config(OV_COCO_CONFIG)
    shrink_model(cfg)
    names = list(cfg.all_classes)
    table = torch.load(
        root.fill('F-ViT/datasets/embeddings/'
                  'coco_with_background_evaclip_vitb_16.pt'))
    rows = torch.stack([table[n] for n in names + ['background']])
    rf.clipself_detector(path, cfg.model.to_dict(), rows, names,
                         list(cfg.base_classes))


PLACEHOLDERS: Dict[str, Maker] = {
    # OpenAI's releases (TorchScript), QuickGELU
    'ViT-B-16.pt':
    lambda root, p: rf.openai_clip(p, 'ViT-B-16-quickgelu'),
    'checkpoints/ViT-B-16.pt':
    lambda root, p: rf.openai_clip(p, 'ViT-B-16-quickgelu'),
    'checkpoints/ViT-L-14.pt':
    lambda root, p: rf.openai_clip(p, 'ViT-L-14-quickgelu'),
    # open_clip state dicts: LAION's exact-GELU B/16, MetaCLIP's fullcc
    'checkpoints/ViT-B-16.bin':
    lambda root, p: rf.open_clip_weights(p, 'ViT-B-16'),
    'checkpoints/b16_fullcc2.5b.pt':
    lambda root, p: rf.open_clip_weights(p, 'ViT-B-16-quickgelu', seed=1),
    'checkpoints/l14_fullcc2.5b.pt':
    lambda root, p: rf.open_clip_weights(p, 'ViT-L-14-quickgelu', seed=1),
    # EVA02-CLIP: the EVA repo's file and open_clip's, one model
    'EVA02_CLIP_B_psz16_s8B.pt':
    _eva_pair('EVA02_CLIP_B_psz16_s8B.pt',
              'checkpoints/open_clip_EVA02-B-16.bin', 'EVA02-B-16'),
    'checkpoints/open_clip_EVA02-B-16.bin':
    _eva_pair('EVA02_CLIP_B_psz16_s8B.pt',
              'checkpoints/open_clip_EVA02-B-16.bin', 'EVA02-B-16'),
    'EVA02_CLIP_L_336_psz14_s6B.pt':
    _eva_pair('EVA02_CLIP_L_336_psz14_s6B.pt',
              'checkpoints/open_clip_EVA02-L-14-336.bin', 'EVA02-L-14-336'),
    'checkpoints/open_clip_EVA02-L-14-336.bin':
    _eva_pair('EVA02_CLIP_L_336_psz14_s6B.pt',
              'checkpoints/open_clip_EVA02-L-14-336.bin', 'EVA02-L-14-336'),
    # LocAtViT releases (timm with GAug, safetensors)
    'locatvit_tiny.safetensors':
    lambda root, p: rf.timm_safetensors(p, 'deit_tiny_patch16_224', gaug=True),
    'locatvit_base.safetensors':
    lambda root, p: rf.timm_safetensors(p, 'vit_base_patch16_224', gaug=True),
    # the LaSt-ViT release (torchvision vit_b_16)
    'last_vit_b16.pth':
    lambda root, p: rf.torchvision_vit(p),
    'ViT_190k.pth':
    lambda root, p: rf.torchvision_vit(p),
    # DINO
    'dino_deitsmall16_pretrain.pth':
    lambda root, p: rf.dino_backbone(p, 'vit_small_patch16_224'),
    'dino0080.pth':
    lambda root, p: rf.dino_training(p),
    # CLIPSelf's F-ViT files
    'F-ViT/datasets/embeddings/coco_with_background_evaclip_vitb_16.pt':
    _clipself_embeddings(_coco80, seed=0),
    'F-ViT/datasets/embeddings/lvis_with_background_evaclip_vitb_16.pt':
    _clipself_embeddings(_lvis_names, seed=1),
    'F-ViT/datasets/mscoco_65_classes.json':
    _ov_coco_classes,
    'fvit_eva_vitb16_ovcoco_clipself_proposals.pth':
    _clipself_detector,
    # the user's images
    'photo.jpg':
    lambda root, p: _image(p, 96, 128, seed=0),
    'photos/':
    _images(['a.jpg', 'b.png']),
    'big_photos/':
    _images(['big.jpg'], height=1100, width=1500),
    'coco_20k_filenames.txt':
    _coco20k_list,
}

# Checkpoints a README tells the user to train (or convert their own): made
# by checkpoint_makers.MAKERS (the recipe's training checkpoint, or the
# converter on a random-init source of the named kind).
TRAINED = (
    'checkpoints/last-clip-vit-b16_mmlocat.pth',
    'checkpoints/cls-clip-vit-b16_mmlocat.pth',
    'checkpoints/last-clip-vit-l14_mmlocat.pth',
    'checkpoints/cls-clip-vit-l14_mmlocat.pth',
    'checkpoints/last-eva02-clip-b16_mmlocat.pth',
    'checkpoints/cls-eva02-clip-b16_mmlocat.pth',
    'checkpoints/last-eva02-clip-l14-336_mmlocat.pth',
    'checkpoints/cls-eva02-clip-l14-336_mmlocat.pth',
    'checkpoints/last-metaclip-b16-fullcc_mmlocat.pth',
    'checkpoints/last-metaclip-l14-fullcc_mmlocat.pth',
    'checkpoints/vit-s_mmlocat.pth',
    'checkpoints/last-s_mmlocat.pth',
    'checkpoints/vit-b_8xb512_in1k.pth',
)

# Outputs of a user's training runs the READMEs test: the recipe's
# training checkpoint (checkpoint_makers.trained).
RUNS: Dict[str, str] = {
    'locat-b.pth':
    'configs/locat/locat-b_8xb128_in1k.py',
    'upernet.pth':
    'configs/locat/upernet_locat-b_ade20k.py',
    'work_dirs/probe_locat-t_ade20k/iter_20000.pth':
    'configs/locat/probe_locat-t_ade20k.py',
    'work_dirs/clip_last-b16_8xb64_cc3m/iter_11550.pth':
    'configs/last/clip_last-b16_8xb64_cc3m.py',
    'work_dirs/clip_cls-b16_8xb64_cc3m/iter_11550.pth':
    'configs/last/clip_cls-b16_8xb64_cc3m.py',
    'work_dirs/fvit_clip-b16_ov-coco/epoch_3.pth':
    'configs/ovd/fvit_clip-b16_ov-coco.py',
    'work_dirs/fvit_eva02-clip-b16_ov-coco/epoch_3.pth':
    'configs/ovd/fvit_eva02-clip-b16_ov-coco.py',
}


class UserRoot:
    """A user's working directory for README commands (module doc).

    Args:
        path: The folder (created).
        data: A folder holding ``data/`` (:func:`make_data`), copied in.
    """

    def __init__(self, path: str, data: str) -> None:
        self.path = path
        os.makedirs(path, exist_ok=True)
        for name in LINKED:
            link = osp.join(path, name)
            if not osp.lexists(link):
                os.symlink(osp.join(REPO, name), link)
        shutil.copytree(
            osp.join(data, 'data'), osp.join(path, 'data'), symlinks=True)
        makers = {name: MAKERS[name] for name in TRAINED}
        makers.update({name: trained(config) for name, config in RUNS.items()})
        self.made = Made(path, makers=dict(makers, **self._made_sources()))
        self.filled: List[str] = []

    def _made_sources(self) -> Dict[str, Callable]:
        """The files MAKERS' makers read that are placeholders here (the
        converters' sources: the release formats above)."""

        def placeholder(name: str) -> Callable:
            return lambda made, dst: self.fill(name)

        return {
            name: placeholder(name)
            for name in PLACEHOLDERS if name in MAKERS
        }

    def abs(self, name: str) -> str:
        return osp.join(self.path, name)

    def knows(self, name: str) -> bool:
        """Whether ``name`` is a placeholder this root can fill."""
        return (name in PLACEHOLDERS or name in TRAINED or name in RUNS)

    def fill(self, name: str) -> Optional[str]:
        """Make placeholder ``name`` if it does not exist yet; its absolute
        path (None: not a placeholder)."""
        path = self.abs(name)
        if osp.exists(path):
            return path
        if name in PLACEHOLDERS:
            os.makedirs(osp.dirname(path.rstrip('/')), exist_ok=True)
            cwd = os.getcwd()
            os.chdir(self.path)
            try:
                PLACEHOLDERS[name](self, path)
            finally:
                os.chdir(cwd)
        elif name in TRAINED or name in RUNS:
            self.made.get(name)
        else:
            return None
        if not osp.exists(path):
            raise AssertionError(f'the placeholder maker of {name} wrote '
                                 'nothing')
        self.filled.append(name)
        return path
