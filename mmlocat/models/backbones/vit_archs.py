"""The one ``arch`` table of mmlocat's ViT backbones.

mmpretrain's ``VisionTransformer.arch_zoo`` (``'s'``/``'small'`` is its
ViT-S: 768-d, 8 layers; ``'deit-t'``, ``'deit-s'``, ``'deit-b'`` are the
DeiT sizes), plus the unambiguous ``'t'``/``'tiny'`` = DeiT-T (mmpretrain
has no ``'t'``). The same alias means the same network in every backbone.

LocAtViT refuses ``'s'``/``'small'``: up to mmlocat 0.1.0 it meant DeiT-S
there (the paper's LocAtViT-S) but mmpretrain's ViT-S everywhere else, so
a silent switch would build another network from the same config.
"""
from typing import Dict, Sequence, Union

from mmpretrain.models.backbones import VisionTransformer

__all__ = ['VIT_ARCHS', 'refuse_archs']

VIT_ARCHS: Dict[str, dict] = {
    **VisionTransformer.arch_zoo,
    **dict.fromkeys(['t', 'tiny'], VisionTransformer.arch_zoo['deit-tiny']),
}

_HOST_VIT_S = VisionTransformer.arch_zoo['small']


def refuse_archs(arch: Union[str, dict], refused: Sequence[str],
                 name: str) -> None:
    """Raise for an ``arch`` alias that ``name`` does not accept.

    Raises:
        ValueError: Naming the DeiT alias the paper sizes mean and the dict
            of mmpretrain's ViT-S.
    """
    if isinstance(arch, str) and arch.lower() in refused:
        vit_s = ', '.join(f'{k}={v}' for k, v in _HOST_VIT_S.items())
        raise ValueError(
            f"{name} does not take arch={arch!r}: it is ambiguous. The "
            "paper's LocAtViT-S is DeiT-S (384-d, 12 layers, 6 heads): use "
            "arch='deit-small' (or 'deit-s'). mmpretrain's ViT-S is "
            f'arch=dict({vit_s})')
