"""From-scratch initialisation of the ViT backbones as the public code.

The public LocAtViT (sinahmr/LocAtViT) is a timm ``VisionTransformer`` and
the public LaSt-ViT (ChengShiest/LAST-ViT) a torchvision ``vit_b_16``; a
model trained from scratch starts from their initialisation, which differs
from mmpretrain's (Xavier MLPs, zero CLS token, zero head). The two schemes
are weight initializers for ``init_cfg``::

    backbone=dict(type='mmlocat.LocAtViT',
                  init_cfg=dict(type='mmlocat.TimmViTInit'))
    backbone=dict(type='mmlocat.LaStViT',
                  init_cfg=dict(type='mmlocat.TorchvisionViTInit'))

:class:`~mmlocat.models.LocAtViT` and :class:`~mmlocat.models.LaStViT` run
the host's initialisation first and the scheme last, so no child module's
``init_weights`` overrides it (on any other module the initializer runs as
mmengine runs initializers: before the children's own ``init_weights``).
The classification head is the classifier's (``init_cfg`` of the head in
the recipes: truncated normal 0.02 for timm, zeros for torchvision, which is
mmpretrain's default).

timm 1.0.19 ``VisionTransformer.init_weights`` (mode ''), restated:
every ``nn.Linear`` (qkv, proj, MLP, GAug's two linears, head) gets a
truncated normal (std 0.02, cut at +-2) weight and a zero bias; ``pos_embed``
a truncated normal 0.02; the CLS and register tokens N(0, 1e-6); the patch
convolution and the LayerNorms keep PyTorch's construction-time default.

torchvision 0.29 ``VisionTransformer.__init__`` (``vit_b_16``), restated:
patch convolution truncated normal with std ``sqrt(1 / fan_in)``, zero bias;
``pos_embedding`` N(0, 0.02) (not truncated); CLS token zeros; the attention
``in_proj`` (= our ``qkv``) Xavier-uniform over the whole (3C, C) matrix
with a zero bias, ``out_proj`` (= ``proj``) PyTorch's default Linear weight
with a zero bias; MLP linears Xavier-uniform with N(0, 1e-6) biases;
LayerNorms ones / zeros; the head zeros.
"""
import math
from typing import Callable, Optional

from mmengine.model.weight_init import trunc_normal_
from torch import nn

from mmlocat.registry import WEIGHT_INITIALIZERS

__all__ = [
    'TimmViTInit', 'TorchvisionViTInit', 'timm_vit_init',
    'torchvision_vit_init', 'init_weights_with_scheme', 'names_scheme'
]


def _reset_default(module: nn.Module) -> None:
    """PyTorch's construction-time initialisation of a norm / conv layer."""
    module.reset_parameters()


def _init_tokens(model: nn.Module, std: float) -> None:
    for name in ('cls_token', 'reg_token'):
        token = getattr(model, name, None)
        if token is None:
            continue
        if std:
            nn.init.normal_(token, std=std)
        else:
            nn.init.zeros_(token)


def timm_vit_init(model: nn.Module) -> None:
    """Initialise ``model`` in place as timm's ViT ``init_weights('')``.

    Args:
        model: An mmpretrain-style ViT (``pos_embed``, ``cls_token``,
            optional ``reg_token``, ``patch_embed``, linear layers).
    """
    for module in model.modules():
        if isinstance(module, nn.Linear):
            trunc_normal_(module.weight, std=.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, (nn.LayerNorm, nn.Conv2d)):
            _reset_default(module)
    if getattr(model, 'pos_embed', None) is not None:
        trunc_normal_(model.pos_embed, std=.02)
    _init_tokens(model, std=1e-6)


def _is_attention(module: nn.Module) -> bool:
    return isinstance(getattr(module, 'qkv', None), nn.Linear) and isinstance(
        getattr(module, 'proj', None), nn.Linear)


def torchvision_vit_init(model: nn.Module) -> None:
    """Initialise ``model`` in place as torchvision's ``VisionTransformer``.

    Linear layers that are neither attention (``qkv`` / ``proj``) nor MLP
    (inside an ``ffn``) get PyTorch's default, as torchvision leaves them.

    Args:
        model: An mmpretrain-style ViT whose blocks have ``attn.qkv``,
            ``attn.proj`` and an ``ffn``.
    """
    done = set()
    for module in model.modules():
        if _is_attention(module):
            nn.init.xavier_uniform_(module.qkv.weight)
            module.proj.reset_parameters()
            for layer in (module.qkv, module.proj):
                if layer.bias is not None:
                    nn.init.zeros_(layer.bias)
            done.update((module.qkv, module.proj))
        elif hasattr(module, 'ffn'):
            for layer in module.ffn.modules():
                if isinstance(layer, nn.Linear):
                    nn.init.xavier_uniform_(layer.weight)
                    if layer.bias is not None:
                        nn.init.normal_(layer.bias, std=1e-6)
                    done.add(layer)
    for module in model.modules():
        if isinstance(module, nn.Linear) and module not in done:
            module.reset_parameters()
        elif isinstance(module, nn.LayerNorm):
            _reset_default(module)
        elif isinstance(module, nn.Conv2d):
            fan_in = module.in_channels // module.groups * math.prod(
                module.kernel_size)
            nn.init.trunc_normal_(module.weight, std=math.sqrt(1 / fan_in))
            if module.bias is not None:
                nn.init.zeros_(module.bias)
    if getattr(model, 'pos_embed', None) is not None:
        nn.init.normal_(model.pos_embed, std=.02)
    _init_tokens(model, std=0.)


class _SchemeInit:
    """A weight initializer that applies one whole-model scheme."""
    scheme: Callable[[nn.Module], None]

    def __init__(self, **kwargs) -> None:
        if kwargs:
            raise TypeError(f'{type(self).__name__} takes no arguments, got '
                            f'{sorted(kwargs)}')
        self.wholemodule = True

    def __call__(self, module: nn.Module) -> None:
        type(self).scheme(module)

    def _get_init_info(self) -> str:
        return type(self).__name__


@WEIGHT_INITIALIZERS.register_module()
class TimmViTInit(_SchemeInit):
    """``init_cfg`` type for :func:`timm_vit_init` (public LocAtViT)."""
    scheme = staticmethod(timm_vit_init)


@WEIGHT_INITIALIZERS.register_module()
class TorchvisionViTInit(_SchemeInit):
    """``init_cfg`` type for :func:`torchvision_vit_init` (public LaSt)."""
    scheme = staticmethod(torchvision_vit_init)


def _registered_scheme(cfg) -> Optional[Callable[[nn.Module], None]]:
    """The whole-model scheme of one ``init_cfg`` entry, looked up in
    ``WEIGHT_INITIALIZERS`` (None for any other initializer)."""
    if not isinstance(cfg, dict):
        return None
    kind = cfg.get('type')
    if isinstance(kind, str):
        kind = WEIGHT_INITIALIZERS.get(kind)
    if isinstance(kind, type) and issubclass(kind, _SchemeInit):
        return kind.scheme
    return None


def _scheme_of(init_cfg) -> Optional[Callable[[nn.Module], None]]:
    """The scheme named by ``init_cfg``, or None for any other config."""
    cfgs = init_cfg if isinstance(init_cfg, (list, tuple)) else [init_cfg]
    schemes = [_registered_scheme(c) for c in cfgs]
    if not any(schemes):
        return None
    if len(cfgs) != 1:
        raise ValueError(
            'an initialisation scheme (mmlocat.TimmViTInit, mmlocat.'
            'TorchvisionViTInit) must be the whole init_cfg, not part of a '
            f'list: got {init_cfg}')
    return schemes[0]


def names_scheme(init_cfg) -> bool:
    """Whether ``init_cfg`` is one whole-model scheme of this module."""
    return _scheme_of(init_cfg) is not None


def init_weights_with_scheme(model: nn.Module,
                             host_init: Callable[[], None]) -> bool:
    """Run ``host_init`` and then the scheme of ``model.init_cfg``, if any.

    The host's ``init_weights`` runs without the scheme (so that children
    such as mmpretrain's encoder layers initialise themselves), and the
    scheme runs last over the whole model, so nothing overrides it.

    Args:
        model: The backbone; its ``init_cfg`` is read and restored.
        host_init: The host class's bound ``init_weights``.

    Returns:
        True if ``init_cfg`` named a scheme (and it was applied), False
        otherwise (nothing was done).
    """
    scheme = _scheme_of(model.init_cfg)
    if scheme is None:
        return False
    cfg = model.init_cfg
    model.init_cfg = None
    try:
        host_init()
    finally:
        model.init_cfg = cfg
    scheme(model)
    return True
