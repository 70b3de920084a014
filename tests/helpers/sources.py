"""Random-init source checkpoints of the public models, at a tiny width.

The state dicts the converters read (``tools/model_converters/*``), built
from the real packages at random init (nothing is downloaded): timm ViT /
DeiT (and the public LocAtViT release, a timm ViT with GAug), torchvision's
``vit_b_16`` (the LaSt-ViT release), DINO ViT-S/16 (timm's layout, as
facebookresearch/dino) and open_clip CLIPs (OpenAI layout; EVA02 with
open_clip's timm trunk, ``visual.trunk.*``), and the same CLIP weights in
the other release formats: OpenAI's TorchScript archive
(:func:`save_openai_archive`, what ``clip.load(..., jit=False)`` reads) and
the EVA repo's EVA-CLIP checkpoint (:func:`eva_clip_state_dict`, the layout
of ``EVA02_CLIP_B_psz16_s8B.pt``).

Every source keeps the real model's depth, patch size, input size and
joint-space width and only shrinks the width: :data:`TINY_WIDTH` channels,
:data:`TINY_HEADS` heads and MLPs of :data:`TINY_MLP_RATIO` times the width.
:func:`tiny_arch` applies the same rule to a backbone's ``arch`` dict, so a
shrunk config loads the converted file, with the config's own depth,
``out_indices`` and sizes.
"""
import copy
import math
from collections import OrderedDict
from typing import Dict, Optional

import torch
from torch import Tensor, nn

__all__ = [
    'TINY_WIDTH', 'TINY_HEADS', 'TINY_MLP_RATIO', 'tiny_arch',
    'timm_vit_state_dict', 'dino_training_checkpoint',
    'torchvision_vit_state_dict', 'tiny_open_clip_config',
    'open_clip_state_dict', 'openai_clip_model', 'save_openai_archive',
    'eva_clip_state_dict'
]

TINY_WIDTH = 32
TINY_HEADS = 2
TINY_MLP_RATIO = 2
# torchvision's ViT builders fix these (patch size, depth); vit_b_16 is the
# LaSt-ViT release.
TORCHVISION_VITS = {'vit_b_16': (16, 12), 'vit_l_16': (16, 24)}

StateDict = Dict[str, Tensor]


def tiny_arch(arch: dict) -> dict:
    """A backbone ``arch`` dict at the tiny width (depth and the rest kept).
    """
    return dict(
        arch,
        embed_dims=TINY_WIDTH,
        num_heads=TINY_HEADS,
        feedforward_channels=TINY_WIDTH * TINY_MLP_RATIO)


def _tiny_timm_kwargs() -> dict:
    return dict(
        embed_dim=TINY_WIDTH, num_heads=TINY_HEADS, mlp_ratio=TINY_MLP_RATIO)


def _gaug_linear(in_features: int, out_features: int) -> nn.Linear:
    # docs/method.md#gaug-gaussian-locality-bias: trunc-normal 0.02
    # weights, zero bias
    layer = nn.Linear(in_features, out_features)
    nn.init.trunc_normal_(layer.weight, std=0.02)
    nn.init.zeros_(layer.bias)
    return layer


def timm_vit_state_dict(model_name: str,
                        gaug: bool = False,
                        seed: int = 0,
                        **kwargs) -> StateDict:
    """A random-init timm ViT / DeiT at the tiny width, e.g.
    ``'vit_base_patch16_224'``, ``'deit_tiny_patch16_224'`` or (DINO's
    layout, no head) ``'vit_small_patch16_224'`` with ``num_classes=0``.

    Args:
        model_name: A timm model name.
        gaug: Add the public LocAtViT's GAug weights to every block
            (``blocks.i.attn.gaug.log_var`` = ``Linear(d, 2)``,
            ``blocks.i.attn.gaug.log_alpha`` = ``Linear(d, 1)``, ``d`` the
            head width; ``docs/method.md#gaug-gaussian-locality-bias``):
            the layout of the released ``locatvit_*`` checkpoints, which
            are timm ViTs plus GAug.
        seed: Random seed.
        **kwargs: More ``timm.create_model`` arguments.
    """
    import timm
    torch.manual_seed(seed)
    model = timm.create_model(
        model_name, pretrained=False, **_tiny_timm_kwargs(), **kwargs)
    state_dict = OrderedDict(model.state_dict())
    if gaug:
        head_dims = TINY_WIDTH // TINY_HEADS
        for i in range(len(model.blocks)):
            for name, out in (('log_var', 2), ('log_alpha', 1)):
                layer = _gaug_linear(head_dims, out)
                for kind, value in layer.state_dict().items():
                    state_dict[f'blocks.{i}.attn.gaug.{name}.{kind}'] = value
    return state_dict


def dino_training_checkpoint(model_name: str = 'vit_small_patch16_224',
                             arch: str = 'vit_small',
                             epoch: int = 80,
                             out_dim: int = 64,
                             seed: int = 0) -> dict:
    """A DINO training checkpoint (``main_dino.py``'s ``checkpoint*.pth``,
    the layout of the LaSt-ViT authors' ``dino0080.pth``): ``student``
    (under DDP's ``module.``) and ``teacher``, each ``backbone.*`` (the timm
    ``model_name`` at the tiny width, no classifier) plus DINO's projection
    head ``head.*`` (3-layer MLP, weight-normed last layer), ``optimizer``,
    ``epoch``, ``args`` (an ``argparse.Namespace``) and ``dino_loss``."""
    import argparse
    hidden, bottleneck = 2 * TINY_WIDTH, TINY_WIDTH // 2

    def network(net_seed: int) -> StateDict:
        state = OrderedDict(
            ('backbone.' + k, v) for k, v in timm_vit_state_dict(
                model_name, seed=net_seed, num_classes=0).items())
        head = nn.Module()
        head.mlp = nn.Sequential(
            nn.Linear(TINY_WIDTH, hidden),
            nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(),
            nn.Linear(hidden, bottleneck))
        head.last_layer = nn.utils.weight_norm(
            nn.Linear(bottleneck, out_dim, bias=False))
        for key, value in head.state_dict().items():
            state['head.' + key] = value
        return state

    student = network(seed + 1)
    return dict(
        student=OrderedDict(('module.' + k, v) for k, v in student.items()),
        teacher=network(seed),
        optimizer=dict(state={}, param_groups=[]),
        epoch=epoch,
        args=argparse.Namespace(arch=arch, patch_size=16, out_dim=out_dim),
        dino_loss=dict(center=torch.zeros(1, out_dim)))


def torchvision_vit_state_dict(model_name: str = 'vit_b_16',
                               seed: int = 0) -> StateDict:
    """A random-init torchvision ``VisionTransformer`` with the depth and
    patch size of ``model_name`` (:data:`TORCHVISION_VITS`), tiny width."""
    from torchvision.models import VisionTransformer
    patch_size, depth = TORCHVISION_VITS[model_name]
    torch.manual_seed(seed)
    model = VisionTransformer(
        image_size=224,
        patch_size=patch_size,
        num_layers=depth,
        num_heads=TINY_HEADS,
        hidden_dim=TINY_WIDTH,
        mlp_dim=TINY_WIDTH * TINY_MLP_RATIO)
    return OrderedDict(model.state_dict())


def tiny_open_clip_config(model_name: str) -> dict:
    """open_clip's config of ``model_name`` at the tiny width.

    The image tower (OpenAI layout) and the text tower get
    :data:`TINY_WIDTH` channels and :data:`TINY_HEADS` heads; depth, patch
    and input size, the joint width ``embed_dim``, the activation and the
    text vocabulary / context are the real model's. A timm image tower
    (EVA02) is kept by name; :func:`open_clip_state_dict` shrinks it.
    """
    import open_clip
    cfg = open_clip.get_model_config(model_name)
    if cfg is None:
        raise ValueError(f'open_clip does not know {model_name!r}')
    cfg = copy.deepcopy(cfg)
    vision = cfg['vision_cfg']
    if not vision.get('timm_model_name'):
        vision.update(
            width=TINY_WIDTH,
            head_width=TINY_WIDTH // TINY_HEADS,
            mlp_ratio=TINY_MLP_RATIO)
    cfg['text_cfg'].update(width=TINY_WIDTH, heads=TINY_HEADS)
    return cfg


def open_clip_state_dict(model_name: str, seed: int = 0) -> StateDict:
    """The state dict of a random-init open_clip ``model_name`` at the tiny
    width (:func:`tiny_open_clip_config`): image and text towers, as
    open_clip saves a CLIP (``visual.*``, ``transformer.*`` /
    ``text.*``, ``logit_scale``).

    A timm image tower (``EVA02-B-16``, ``EVA02-L-14-336``) is open_clip's
    ``TimmModel`` layout: the timm model at the tiny width under
    ``visual.trunk.``, its head projecting to ``embed_dim``.
    """
    import open_clip
    cfg = tiny_open_clip_config(model_name)
    vision = cfg['vision_cfg']
    timm_name = vision.get('timm_model_name')
    torch.manual_seed(seed)
    if timm_name:
        import timm
        if vision.get('timm_proj') not in (None, 'none'):
            raise ValueError(f'{model_name}: only timm towers whose head is '
                             'the projection are built here')
        trunk = timm.create_model(
            timm_name,
            pretrained=False,
            num_classes=cfg['embed_dim'],
            global_pool=vision.get('timm_pool', 'token'),
            img_size=vision.get('image_size', 224),
            **_tiny_timm_kwargs())
        # the text tower with a throw-away OpenAI-layout image tower
        cfg['vision_cfg'] = dict(
            image_size=16, layers=1, width=8, head_width=8, patch_size=16)
    custom = cfg.pop('custom_text', False)
    model = (open_clip.CustomTextCLIP if custom else open_clip.CLIP)(**cfg)
    state_dict = OrderedDict(model.state_dict())
    if timm_name:
        state_dict = OrderedDict((k, v) for k, v in state_dict.items()
                                 if not k.startswith('visual.'))
        for key, value in trunk.state_dict().items():
            state_dict['visual.trunk.' + key] = value
    return state_dict


def openai_clip_model(model_name: str = 'ViT-B-16-quickgelu',
                      seed: int = 0,
                      model_cfg: Optional[dict] = None) -> nn.Module:
    """A random-init open_clip ``CLIP`` (OpenAI layout) whose weights are
    the values OpenAI's releases can hold: the tensors OpenAI stores in
    float16 (open_clip's ``convert_weights_to_lp``: linear, conv and
    attention weights, the projections) are rounded to float16, kept in a
    float32 model, so :func:`save_openai_archive` and ``torch.save`` of its
    state dict write the same weights.

    Args:
        model_name: open_clip model of the tiny config
            (:func:`tiny_open_clip_config`); OpenAI's are QuickGELU.
        seed: Random seed.
        model_cfg: An open_clip config instead (e.g. 64-wide heads, which
            open_clip's reader of OpenAI archives infers from the width).
    """
    import open_clip
    cfg = copy.deepcopy(model_cfg or tiny_open_clip_config(model_name))
    if cfg['vision_cfg'].get('timm_model_name') or cfg.get('custom_text'):
        raise ValueError(f'{model_name}: OpenAI CLIPs are OpenAI-layout '
                         'towers')
    torch.manual_seed(seed)
    model = open_clip.CLIP(**cfg).eval()
    open_clip.model.convert_weights_to_lp(model, torch.float16)
    return model.float()


def save_openai_archive(model: nn.Module, path: str) -> str:
    """Write an open_clip ``CLIP`` as OpenAI releases CLIP: a TorchScript
    archive (``torch.jit.save`` of the model traced for ``encode_image``
    and ``encode_text``) with float16 weights (open_clip's
    ``convert_weights_to_lp``) and, in its ``state_dict()``, the ints
    ``input_resolution`` / ``context_length`` / ``vocab_size``; the causal
    mask is a constant of the traced code, not an entry (``clip.load``'s
    ``build_model`` loads the rest strictly). Returns ``path``."""
    import open_clip
    model = copy.deepcopy(model).eval()
    mask = model.attn_mask
    del model.attn_mask  # a buffer in open_clip, a constant in OpenAI's
    model.attn_mask = mask
    size = model.visual.image_size
    size = size[0] if isinstance(size, (tuple, list)) else size
    ints = dict(
        input_resolution=size,
        context_length=model.context_length,
        vocab_size=model.vocab_size)
    for key, value in ints.items():
        if hasattr(model, key):
            delattr(model, key)
        model.register_buffer(key, torch.tensor(value))
    open_clip.model.convert_weights_to_lp(model, torch.float16)
    image = torch.zeros(1, 3, size, size, dtype=torch.float16)
    text = torch.zeros(1, ints['context_length'], dtype=torch.long)
    traced = torch.jit.trace_module(
        model,
        dict(encode_image=(image, ), encode_text=(text, )),
        check_trace=False)
    torch.jit.save(traced, path)
    return path


# open_clip's timm EVA trunk -> the EVA repo's names (EVA-CLIP's
# ``eva_vit_model.py``), inside a block
_EVA_BLOCK_NAMES = {
    'attn.q_proj.bias': 'attn.q_bias',
    'attn.v_proj.bias': 'attn.v_bias',
    'attn.norm.': 'attn.inner_attn_ln.',
    'mlp.fc1_g.': 'mlp.w1.',
    'mlp.fc1_x.': 'mlp.w2.',
    'mlp.norm.': 'mlp.ffn_ln.',
    'mlp.fc2.': 'mlp.w3.',
}
_EVA_KEPT = ('norm1.', 'norm2.', 'attn.q_proj.weight', 'attn.k_proj.weight',
             'attn.v_proj.weight', 'attn.proj.')


def eva_clip_state_dict(model_name: str = 'EVA02-B-16',
                        seed: int = 0,
                        rope_pt_seq_len: float = 16) -> StateDict:
    """The weights of :func:`open_clip_state_dict` (``model_name``, ``seed``)
    in the EVA repo's EVA-CLIP layout (baaivision/EVA ``EVA-CLIP``, e.g.
    ``EVA02_CLIP_B_psz16_s8B.pt``): the image tower under ``visual.`` with
    EVA's names (``attn.q_bias`` / ``v_bias``, ``attn.inner_attn_ln``,
    ``mlp.w1`` / ``w2`` / ``ffn_ln`` / ``w3``) and its RoPE tables
    (``rope.freqs_{cos,sin}`` at the top and, the module being shared, in
    every block's attention), the text tower under ``text.`` (open_clip's
    ``CustomTextCLIP`` names are EVA's), ``logit_scale``. The same CLIP as
    the open_clip file, in another file."""
    from mmlocat.models.backbones.eva02_clip_layers import eva_rope_table
    source = open_clip_state_dict(model_name, seed)
    out = OrderedDict()
    blocks = set()
    for key, value in source.items():
        if not key.startswith('visual.trunk.'):
            out[key] = value
            continue
        name = key[len('visual.trunk.'):]
        if name.startswith('blocks.'):
            _, index, rest = name.split('.', 2)
            blocks.add(int(index))
            renamed = next((new + rest[len(old):]
                            for old, new in _EVA_BLOCK_NAMES.items()
                            if rest.startswith(old)), None)
            if renamed is None and not rest.startswith(_EVA_KEPT):
                raise ValueError(f'{model_name}: no EVA name for {key}')
            name = f'blocks.{index}.{renamed or rest}'
        out['visual.' + name] = value
    patch = out['visual.patch_embed.proj.weight']
    grid = math.isqrt(out['visual.pos_embed'].shape[1] - 1)
    head_dims = patch.shape[0] // TINY_HEADS
    cos, sin = eva_rope_table((grid, grid), head_dims, rope_pt_seq_len)
    for prefix in ['visual.'
                   ] + [f'visual.blocks.{i}.attn.' for i in sorted(blocks)]:
        out[prefix + 'rope.freqs_cos'] = cos.clone()
        out[prefix + 'rope.freqs_sin'] = sin.clone()
    return out
