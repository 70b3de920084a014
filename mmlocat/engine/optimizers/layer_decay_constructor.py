"""Layer-wise learning-rate decay for ViT backbones in any host model.

Reference: BEiT (https://arxiv.org/abs/2106.08254), as used for ViT
fine-tuning on dense tasks. mmseg's own constructor only knows its own
backbones; this one asks the backbone itself (``get_layer_depth``, as
mmpretrain's ViTs and mmlocat's backbones provide), so it works inside
mmseg's ``EncoderDecoder``, mmdet detectors and mmpretrain classifiers.
"""
from numbers import Real
from typing import Dict, List, Optional, Tuple

import torch.nn as nn
from mmengine.logging import MMLogger
from mmengine.model import is_model_wrapper
from mmengine.optim import DefaultOptimWrapperConstructor

from mmlocat.registry import OPTIM_WRAPPER_CONSTRUCTORS

__all__ = ['LayerDecayOptimWrapperConstructor', 'DEFAULT_NO_DECAY']

# Parameters that never get weight decay, besides all 1-D parameters
# (biases, norm weights, GAug's linear biases).
DEFAULT_NO_DECAY = ('pos_embed', 'cls_token', 'register_tokens', 'reg_token',
                    'absolute_pos_embed', 'relative_position_bias_table')


@OPTIM_WRAPPER_CONSTRUCTORS.register_module()
class LayerDecayOptimWrapperConstructor(DefaultOptimWrapperConstructor):
    """Give each parameter ``lr * decay_rate ** (max_depth - 1 - depth)``.

    The depth comes from ``model.backbone.get_layer_depth(name,
    'backbone.')``; parameters outside the backbone (neck, heads) get
    ``max_depth - 1`` and so the base learning rate. 1-D parameters and
    those whose name contains one of ``no_decay_names`` get no weight decay.
    Frozen parameters (``requires_grad=False``) are left out. Parameters
    that share a learning rate and weight decay share one group.

    ``paramwise_cfg`` keys:

    * ``layer_decay_rate`` (float, required): decay per layer in (0, 1],
      e.g. 0.65 for ViT-B.
    * ``no_decay_names`` (list of str): name substrings without weight
      decay, in addition to all 1-D parameters. Defaults to position
      embeddings, CLS and register tokens (:data:`DEFAULT_NO_DECAY`).

    Example:
        >>> optim_wrapper = dict(
        ...     type='OptimWrapper',
        ...     optimizer=dict(type='AdamW', lr=1e-4, weight_decay=0.05),
        ...     constructor='mmlocat.LayerDecayOptimWrapperConstructor',
        ...     paramwise_cfg=dict(layer_decay_rate=0.65))
    """
    ALLOWED_KEYS = ('layer_decay_rate', 'no_decay_names')

    def _validate_cfg(self) -> None:
        """Check ``paramwise_cfg`` when the constructor is built."""
        super()._validate_cfg()
        cfg = self.paramwise_cfg
        unknown = sorted(set(cfg) - set(self.ALLOWED_KEYS))
        if unknown:
            raise ValueError(f'unknown paramwise_cfg keys {unknown} for '
                             f'LayerDecayOptimWrapperConstructor; allowed: '
                             f'{list(self.ALLOWED_KEYS)}')
        rate = cfg.get('layer_decay_rate')
        if (isinstance(rate, bool) or not isinstance(rate, Real)
                or not 0 < rate <= 1):
            raise ValueError('paramwise_cfg.layer_decay_rate must be a '
                             f'number in (0, 1], got {rate!r}')
        names = cfg.get('no_decay_names', DEFAULT_NO_DECAY)
        strings = not isinstance(names, str) and all(
            isinstance(n, str) for n in names)
        if not strings:
            raise TypeError('paramwise_cfg.no_decay_names must be a list of '
                            f'strings, got {names!r}')
        if self.base_lr is None:
            raise ValueError('LayerDecayOptimWrapperConstructor needs '
                             'optimizer.lr')

    def add_params(self,
                   params: List[dict],
                   module: nn.Module,
                   prefix: str = '',
                   is_dcn_module: Optional[int] = None) -> None:
        """Append one parameter group per (lr scale, weight decay) pair.

        Args:
            params: The list of parameter groups to extend.
            module: The whole model (``backbone`` attribute), possibly
                wrapped by an mmengine model wrapper.
            prefix: Unused (names are taken from ``module``).
            is_dcn_module: Unused.
        """
        if is_model_wrapper(module):
            module = module.module
        backbone = getattr(module, 'backbone', None)
        if backbone is None or not callable(
                getattr(backbone, 'get_layer_depth', None)):
            raise TypeError(
                'LayerDecayOptimWrapperConstructor needs a model with a '
                '`backbone` that implements `get_layer_depth`, got '
                f'{type(module).__name__} with backbone '
                f'{type(backbone).__name__}')
        decay_rate = float(self.paramwise_cfg['layer_decay_rate'])
        no_decay = tuple(
            self.paramwise_cfg.get('no_decay_names', DEFAULT_NO_DECAY))
        base_wd = self.optimizer_cfg.get('weight_decay', 0.) or 0.
        logger = MMLogger.get_current_instance()

        groups: Dict[Tuple[int, bool], dict] = {}
        for name, param in module.named_parameters():
            if not param.requires_grad:
                continue
            # names outside the prefix (neck, heads) get max_depth - 1
            depth, max_depth = backbone.get_layer_depth(
                name, prefix='backbone.')
            decay = param.ndim > 1 and not any(n in name for n in no_decay)
            key = (max_depth - 1 - depth, decay)
            if key not in groups:
                scale = decay_rate**key[0]
                groups[key] = dict(
                    params=[],
                    param_names=[],
                    lr=self.base_lr * scale,
                    lr_scale=scale,
                    weight_decay=base_wd if decay else 0.)
            groups[key]['params'].append(param)
            groups[key]['param_names'].append(name)
            logger.debug(f'{name}: depth {depth}/{max_depth}, lr scale '
                         f'{groups[key]["lr_scale"]:.4g}, weight decay '
                         f'{groups[key]["weight_decay"]}')
        # from the stem (lowest lr) to the heads, decayed before not decayed
        for key in sorted(groups, key=lambda k: (-k[0], not k[1])):
            params.append(groups[key])
        logger.info(f'layer-wise lr decay {decay_rate}: {len(groups)} '
                    'parameter groups')
