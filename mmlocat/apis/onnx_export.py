"""ONNX export of mmlocat classifiers and segmentors, checked by onnxruntime.

What is exported and how (see ``docs/deployment.md``):

* the model's ``mode='tensor'`` output: classification logits (mmpretrain)
  or the decode head's segmentation logits at its own stride (mmseg);
* GAug (LocAtViT) through its dense reference kernel
  (``gaug_cfg=dict(impl='dense')``: the bias as the SDPA mask), the same
  function as the default kernels to float32 round-off; the chunked
  kernel's custom autograd function and FlexAttention's compiled kernels
  have no ONNX form;
* LazyStrike (LaSt-ViT) with its channel FFT low-pass replaced by the equal
  real ``D x D`` matrix
  (:func:`mmlocat.models.layers.lowpass_as_matmul`): ONNX has no complex
  tensors and torch's TorchScript exporter has no ``aten::fft_fft``;
* a fixed input height and width (the patch grid is a Python integer in
  GAug's distance tables and the position-embedding resize, so the traced
  graph holds it); the batch axis can be dynamic. Export once per input
  size, or resize / pad inputs to the exported size. At a grid other than
  the training one the resampled position embedding is stored as a
  constant (:func:`frozen_pos_embed`: antialiased bicubic resampling has
  no ONNX op);
* input sizes at which the exporter can write every adaptive pooling
  (UPerHead's pyramid pooling): :func:`check_export_size` runs the model
  once in PyTorch first and refuses, in one line saying which sizes work
  and why, a size whose pooled maps the output sizes do not divide, whose
  patch grid is padded, or at which the model cannot run at all.

Uses torch's TorchScript-based exporter (``dynamo=False``): the
``torch.export`` one needs ``onnxscript``, which is not a dependency.
"""
import contextlib
import math
import os.path as osp
from typing import Dict, Iterator, Optional, Sequence, Tuple

import numpy as np
import torch
from mmengine.config import Config
from mmengine.registry import MODELS, init_default_scope

from mmlocat.models.layers import lowpass_as_matmul
from mmlocat.utils.checkpoint_io import _first_line
from mmlocat.utils.launch import load_config
from mmlocat.utils.pretrained import load_model_weights

__all__ = [
    'build_export_model', 'lowpass_as_matmul', 'frozen_pos_embed',
    'export_onnx', 'run_onnx', 'TensorOutput', 'EXPORT_SCOPES',
    'check_export_size'
]

EXPORT_SCOPES = ('mmpretrain', 'mmseg')


class TensorOutput(torch.nn.Module):
    """``model(x, mode='tensor')`` as a one-input module for the exporter."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.model(x, mode='tensor')
        return out[-1] if isinstance(out, (tuple, list)) else out


def build_export_model(
        config: str,
        checkpoint: Optional[str],
        cfg_options: Optional[Dict] = None) -> Tuple[TensorOutput, Config]:
    """The model of ``config`` in eval mode, GAug on its dense kernel,
    loaded from ``checkpoint`` (strict coverage, as ``tools/test.py``;
    ``None`` keeps the random init, for tests of the export itself)."""
    cfg = load_config(config)
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    scope = cfg.get('default_scope')
    if scope not in EXPORT_SCOPES:
        raise ValueError(f'{config}: ONNX export covers classifiers and '
                         f'segmentors (default_scope in {EXPORT_SCOPES}), not '
                         f'{scope!r}')
    backbone = cfg.model.backbone
    is_locat = str(backbone.get('type', '')).endswith('LocAtViT')
    if is_locat or 'gaug_cfg' in backbone:
        backbone['gaug_cfg'] = dict(
            backbone.get('gaug_cfg') or {}, impl='dense')
    init_default_scope(scope)
    model = MODELS.build(cfg.model)
    if checkpoint is not None:
        load_model_weights(model, checkpoint)
    return TensorOutput(model).eval(), cfg


@contextlib.contextmanager
def frozen_pos_embed(backbone: torch.nn.Module,
                     inputs: torch.Tensor) -> Iterator[None]:
    """The position embedding resampled to the export grid, as a constant.

    At a grid other than the training one the ViTs resample their position
    embedding with antialiased bicubic interpolation, which has no ONNX op;
    it depends on the (frozen) parameters only, so it is computed once for
    ``inputs``'s grid, outside the trace, and the traced graph holds the
    result (the backbone's own ``constant_pos_embed``; backbones without
    one are left as they are).
    """
    if not hasattr(backbone, 'constant_pos_embed'):
        yield
        return
    with backbone.constant_pos_embed():
        with torch.no_grad():
            backbone(inputs)  # fill the cache outside the trace
        yield


def _pair(value, like: Tuple[int, int]) -> Tuple[int, int]:
    """An adaptive pooling's output size as (h, w); None keeps ``like``."""
    if not isinstance(value, (tuple, list)):
        value = (value, value)
    return tuple(int(v) if v is not None else d for v, d in zip(value, like))


def _trace_shapes(module: TensorOutput, shape: Tuple[int, int]) -> Dict:
    """Run ``module`` once on a ``(1, 3, H, W)`` batch and record what
    decides whether it can be exported at that size.

    Returns:
        ``pools``: ``(name, input hw, output hw)`` of every adaptive pooling
        that is not global; ``padded``: ``(name, pad hw)`` of every patch
        embedding that padded its input; ``patch``: the patch size (h, w)
        (1 without a padding patch embedding); ``error``: the first line of
        the PyTorch error, if the model cannot run at this size.
    """
    from mmcv.cnn.bricks.transformer import AdaptivePadding
    found = dict(pools=[], padded=[], patch=(1, 1), error=None)
    handles = []

    def on_pool(name):

        def hook(mod, args, out):
            in_hw = tuple(args[0].shape[-2:])
            out_hw = _pair(mod.output_size, in_hw)
            if out_hw != (1, 1):  # global pooling is always exported
                found['pools'].append((name, in_hw, out_hw))

        return hook

    def on_pad(name):

        def hook(mod, args):
            pad = mod.get_pad_shape(args[0].shape[-2:])
            if any(pad):
                found['padded'].append((name, tuple(pad)))

        return hook

    for name, mod in module.model.named_modules():
        if isinstance(
                mod, (torch.nn.AdaptiveAvgPool2d, torch.nn.AdaptiveMaxPool2d)):
            handles.append(mod.register_forward_hook(on_pool(name)))
        elif isinstance(mod, AdaptivePadding):
            handles.append(mod.register_forward_pre_hook(on_pad(name)))
            found['patch'] = tuple(mod.stride)
    try:
        with torch.no_grad():
            module(torch.zeros(1, 3, *shape))
    except Exception as err:  # reported as the reason this size fails
        found['error'] = _first_line(err)
    finally:
        for handle in handles:
            handle.remove()
    return found


def _size_unit(found: Dict, shape: Tuple[int, int]) -> Tuple[int, int]:
    """The (h, w) that every exportable size is a multiple of: the patch
    size (no padding) and, per pooling, its map's stride times every output
    size (so that they divide the map)."""
    unit = list(found['patch'])
    for _, in_hw, out_hw in found['pools']:
        for i in range(2):
            stride = 2**round(math.log2(shape[i] / in_hw[i]))
            unit[i] = math.lcm(unit[i], stride * out_hw[i])
    return tuple(unit)


def check_export_size(module: TensorOutput,
                      shape: Sequence[int],
                      dynamic_batch: bool = False) -> None:
    """Refuse an input size the TorchScript exporter cannot export.

    The exporter writes ``adaptive_avg_pool2d`` (UPerHead's pyramid
    pooling) only when every output size divides the pooled map and the
    map's size is static in the traced graph: a patch grid padded by the
    patch embedding (sides not multiples of the patch size) or a free
    batch axis (``dynamic_batch``) hides it. Without such a pooling
    (the classifiers) any size the model runs at exports.

    Args:
        module: From :func:`build_export_model`.
        shape: ``(H, W)``.
        dynamic_batch: Whether the batch axis is to be left free.

    Raises:
        ValueError: One line: why ``shape`` fails and which sizes work (for
            the shipped UperNet configs multiples of 192: the stride-32
            map must be divisible by the pooling sizes 1, 2, 3 and 6).
    """
    h, w = (int(s) for s in shape)
    found = _trace_shapes(module, (h, w))
    reasons = []
    if found['error'] is not None:
        reasons.append(f'the model cannot run at {h}x{w} in PyTorch either '
                       f'({found["error"]})')
    pools = found['pools']
    for name, in_hw, out_hw in pools:
        if in_hw[0] % out_hw[0] or in_hw[1] % out_hw[1]:
            reasons.append(
                f'{name} pools a {in_hw[0]}x{in_hw[1]} map to '
                f'{out_hw[0]}x{out_hw[1]}, and the exporter needs the output '
                'size to divide the input size')
            break
    if pools and found['padded']:
        name, _ = found['padded'][0]
        reasons.append(
            f'{name} pads the input (sides not multiples of the patch size '
            f'{found["patch"][0]}x{found["patch"][1]}), which hides the '
            f'map size from the exporter at {pools[0][0]}')
    if pools and dynamic_batch and not reasons:
        raise ValueError(
            f'cannot export with --dynamic-batch: the exporter loses the '
            f'spatial sizes before the adaptive pooling of {pools[0][0]}; '
            'export with a fixed batch (drop --dynamic-batch)')
    if not reasons:
        return
    probe = (h, w)
    if found['error'] is not None:
        # learn the strides at a size every patch embedding and pooling
        # stack runs at
        probe = tuple(32 * p for p in found['patch'])
        found = _trace_shapes(module, probe)
        if found['error'] is not None:
            raise ValueError(f'cannot export at {h}x{w}: {reasons[0]}')
    unit = _size_unit(found, probe)
    near = [max(u, round(s / u) * u) for s, u in zip((h, w), unit)]
    sides = (f'height and width multiples of {unit[0]}' if unit[0] == unit[1]
             else f'height a multiple of {unit[0]}, width of {unit[1]}')
    raise ValueError(
        f'cannot export at {h}x{w}: {"; ".join(reasons)}. Sizes that '
        f'always export: {sides} (nearest: {near[0]}x{near[1]}); resize or '
        'pad the images to the exported size')


def export_onnx(module: TensorOutput,
                shape: Sequence[int],
                path: str,
                opset: int = 17,
                dynamic_batch: bool = True) -> str:
    """Export ``module`` for ``(B, 3, H, W)`` inputs to ``path``.

    Args:
        module: From :func:`build_export_model`.
        shape: ``(H, W)``, fixed in the graph.
        path: The ``.onnx`` file.
        opset: ONNX opset.
        dynamic_batch: Leave the batch axis free.

    Returns:
        ``path``.
    """
    h, w = (int(s) for s in shape)
    if h < 1 or w < 1:
        raise ValueError(f'--shape must be positive, got {h} {w}')
    check_export_size(module, (h, w), dynamic_batch)
    dummy = torch.randn(1, 3, h, w)
    axes = dict(input={0: 'batch'}, output={0: 'batch'})
    backbone = module.model.backbone
    width = getattr(backbone, 'embed_dims', None)
    lowpass = (
        lowpass_as_matmul([width])
        if width is not None else contextlib.nullcontext())
    with lowpass, frozen_pos_embed(backbone, dummy), torch.no_grad():
        try:
            torch.onnx.export(
                module, (dummy, ),
                path,
                dynamo=False,
                opset_version=opset,
                input_names=['input'],
                output_names=['output'],
                dynamic_axes=axes if dynamic_batch else None)
        except Exception as err:
            # torch appends the whole traced graph (hundreds of KB)
            message = _first_line(err).split(' [Caused by')[0][:500]
            raise RuntimeError(f'the TorchScript exporter failed at {h}x{w}: '
                               f'{message}') from None
    if not osp.isfile(path):
        raise RuntimeError(f'the exporter wrote no file at {path}')
    return path


def run_onnx(path: str, inputs: torch.Tensor) -> np.ndarray:
    """The output of the ONNX file for ``inputs`` on onnxruntime's CPU."""
    try:
        import onnxruntime as ort
    except ImportError as err:
        raise ImportError('checking the export needs onnxruntime: pip '
                          'install onnxruntime') from err
    session = ort.InferenceSession(path, providers=['CPUExecutionProvider'])
    return session.run(None, {'input': inputs.numpy()})[0]
