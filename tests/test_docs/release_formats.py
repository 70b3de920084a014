"""Files in the formats the public models are released in, at random init.

Each function writes what a user downloads, at the tiny size of the tests
(:mod:`helpers.sources`; the open_clip models as
:mod:`tiny_models` registers them):

* :func:`openai_clip`: OpenAI's CLIP release (``ViT-B-16.pt``): a
  TorchScript archive (``torch.jit.save``) of the whole CLIP whose
  ``state_dict()`` has OpenAI's layout (``visual.conv1``,
  ``transformer.resblocks.*``, ``text_projection``, ``logit_scale`` = log
  100), which ``clip.load(..., jit=False)`` reads with ``torch.jit.load``.
  (``clip.load`` then derives the head count as width / 64, which the tiny
  width does not allow; the layout is checked key by key instead.)
* :func:`open_clip_weights`: an open_clip state dict
  (``open_clip_pytorch_model.bin``: LAION's exact-GELU ``ViT-B-16``,
  MetaCLIP's ``ViT-B-16-quickgelu``).
* :func:`eva_clip_pair`: one EVA02-CLIP in both of its releases: the EVA
  repo's ``EVA02_CLIP_B_psz16_s8B.pt`` (``visual.*`` in EVA's layout with
  its RoPE tables, ``text.*``, ``logit_scale``) and open_clip's
  ``EVA02-B-16`` state dict (``visual.trunk.*``, timm's layout), the second
  derived from the first by timm's own ``checkpoint_filter_fn`` and loaded
  strictly by open_clip, so both hold the same weights.
* :func:`timm_safetensors`: a timm ViT / DeiT (with GAug: the LocAtViT
  release ``locatvit_base.safetensors``) as safetensors.
* :func:`torchvision_vit`: torchvision's ``vit_b_16`` state dict (the
  LaSt-ViT release ``ViT_190k.pth``).
* :func:`dino_backbone`, :func:`dino_training`: DINO's released backbone
  (``dino_deitsmall16_pretrain.pth``) and a ``main_dino.py`` training
  checkpoint (``dino0080.pth``).
* :func:`clipself_embeddings`, :func:`clipself_detector`: CLIPSelf's
  F-ViT text-embedding ``.pt`` dicts and its F-ViT checkpoint (mmdet 2.x
  layout, ``tests/helpers/clipself_reference.py``).
"""
import math
import os
import os.path as osp
from collections import OrderedDict
from typing import Dict, Sequence

import torch
from helpers import sources

# OpenAI's released CLIPs store logit_scale = log(100)
OPENAI_LOGIT_SCALE = math.log(100.)


def _save(obj, path: str) -> str:
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    torch.save(obj, path)
    return path


def openai_clip(path: str, model_name: str, seed: int = 0) -> str:
    """OpenAI's TorchScript release of ``model_name`` (module doc)."""
    import open_clip
    cfg = dict(open_clip.get_model_config(model_name))
    cfg.pop('custom_text', None)
    torch.manual_seed(seed)
    model = open_clip.CLIP(**cfg).eval()
    with torch.no_grad():
        model.logit_scale.fill_(OPENAI_LOGIT_SCALE)
    # OpenAI's causal mask is a plain tensor attribute, not in the state
    # dict (clip.load's build_model loads the archive's state dict strictly)
    mask = model.attn_mask
    del model._buffers['attn_mask']
    model.attn_mask = mask
    size = cfg['vision_cfg']['image_size']
    tokens = torch.zeros(
        1, cfg['text_cfg']['context_length'], dtype=torch.long)
    with torch.no_grad():
        archive = torch.jit.trace_module(
            model,
            dict(
                encode_image=torch.zeros(1, 3, size, size),
                encode_text=tokens))
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    torch.jit.save(archive, path)
    return path


def open_clip_weights(path: str, model_name: str, seed: int = 0) -> str:
    """An open_clip state dict of ``model_name`` (image and text towers)."""
    return _save(sources.open_clip_state_dict(model_name, seed=seed), path)


def _eva_geometry(model_name: str) -> Dict:
    """The EVA tower's sizes, read from the tiny timm trunk."""
    import open_clip
    import timm
    cfg = open_clip.get_model_config(model_name)
    vision = cfg['vision_cfg']
    trunk = timm.create_model(
        vision['timm_model_name'],
        pretrained=False,
        num_classes=cfg['embed_dim'],
        global_pool=vision.get('timm_pool', 'token'),
        img_size=vision['image_size'])
    block = trunk.blocks[0]
    return dict(
        trunk=trunk,
        arch=dict(
            dim=trunk.embed_dim,
            depth=len(trunk.blocks),
            heads=block.attn.num_heads,
            hidden=block.mlp.fc2.in_features,
            out_dim=cfg['embed_dim'],
            patch=trunk.patch_embed.patch_size[0],
            img=vision['image_size']))


def eva_clip_pair(repo_path: str,
                  open_clip_path: str,
                  model_name: str,
                  seed: int = 0) -> None:
    """One EVA02-CLIP as the EVA repo's ``.pt`` and open_clip's state dict
    (module doc)."""
    import open_clip
    from helpers.clipself_reference import EVAVisual, randomise_
    from timm.models.eva import checkpoint_filter_fn
    geometry = _eva_geometry(model_name)
    visual = randomise_(EVAVisual(**geometry['arch']), seed)
    # EVA's VisionRotaryEmbeddingFast keeps freqs_cos / freqs_sin (in the
    # tower and in every attention); the cache counter is CLIPSelf's
    eva_visual = OrderedDict(('visual.' + k, v.clone())
                             for k, v in visual.state_dict().items()
                             if not k.endswith('.flag'))
    text = OrderedDict(
        (k, v)
        for k, v in sources.open_clip_state_dict(model_name, seed).items()
        if not k.startswith('visual.'))
    _save(OrderedDict(**eva_visual, **text), repo_path)
    trunk = geometry['trunk']
    timm_visual = checkpoint_filter_fn(dict(eva_visual), trunk)
    trunk.load_state_dict(timm_visual, strict=True)
    weights = OrderedDict(
        ('visual.trunk.' + k, v) for k, v in timm_visual.items())
    weights.update(text)
    model = open_clip.create_model(model_name, pretrained=None)
    model.load_state_dict(weights, strict=True)
    _save(weights, open_clip_path)


def timm_safetensors(path: str, model_name: str, gaug: bool = False) -> str:
    """A timm ViT / DeiT state dict as safetensors."""
    from safetensors.torch import save_file
    state_dict = sources.timm_vit_state_dict(model_name, gaug=gaug)
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    save_file({k: v.contiguous() for k, v in state_dict.items()}, path)
    return path


def torchvision_vit(path: str, model_name: str = 'vit_b_16') -> str:
    """torchvision's ViT state dict (the LaSt-ViT release)."""
    return _save(sources.torchvision_vit_state_dict(model_name), path)


def dino_backbone(path: str, model_name: str) -> str:
    """DINO's released backbone: a timm-layout ViT without a head."""
    return _save(sources.timm_vit_state_dict(model_name, num_classes=0), path)


def dino_training(path: str) -> str:
    """A DINO training checkpoint (``main_dino.py``)."""
    return _save(sources.dino_training_checkpoint(), path)


def clipself_embeddings(path: str,
                        names: Sequence[str],
                        dims: int,
                        seed: int = 0) -> str:
    """CLIPSelf's text-embedding file: ``{class name: unit (D,) tensor}``
    with ``'background'`` last."""
    gen = torch.Generator().manual_seed(seed)
    table = OrderedDict()
    for name in list(names) + ['background']:
        table[name] = torch.nn.functional.normalize(
            torch.randn(dims, generator=gen), dim=0)
    return _save(table, path)


def clipself_detector(path: str, model_cfg: Dict, embeddings: torch.Tensor,
                      names: Sequence[str], base: Sequence[str]) -> str:
    """CLIPSelf's released F-ViT checkpoint (mmcv 1.x ``save_checkpoint``
    of its detector) for the EVA02-CLIP tower of the tiny ``model_cfg``
    (the shrunk config's model: its tower arch, taps and test settings).
    ``embeddings``: the ``(C + 1, D)`` rows its head holds."""
    from helpers.clipself_reference import (FViTReference, mmcv_checkpoint,
                                            randomise_)
    backbone = model_cfg['backbone']
    arch = backbone['arch']
    ref = FViTReference(
        dict(
            dim=arch['embed_dims'],
            depth=arch['num_layers'],
            heads=arch['num_heads'],
            hidden=arch['feedforward_channels'],
            out_dim=arch['output_dims'],
            patch=backbone['patch_size'],
            img=backbone['img_size']),
        tuple(backbone['out_indices']),
        model_cfg['neck'][1]['out_channels'],
        embeddings, [n in base for n in names],
        rpn_test_cfg=model_cfg['test_cfg']['rpn'],
        rcnn_test_cfg=model_cfg['test_cfg']['rcnn'])
    randomise_(ref, 3)
    return _save(mmcv_checkpoint(ref, names), path)
