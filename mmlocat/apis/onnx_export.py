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
  no ONNX op).

Uses torch's TorchScript-based exporter (``dynamo=False``): the
``torch.export`` one needs ``onnxscript``, which is not a dependency.
"""
import contextlib
import os.path as osp
from typing import Dict, Iterator, Optional, Sequence, Tuple

import numpy as np
import torch
from mmengine.config import Config
from mmengine.registry import MODELS, init_default_scope

from mmlocat.models.layers import lowpass_as_matmul
from mmlocat.utils.launch import load_config
from mmlocat.utils.pretrained import check_checkpoint_covers

__all__ = [
    'build_export_model', 'lowpass_as_matmul', 'frozen_pos_embed',
    'export_onnx', 'run_onnx', 'TensorOutput', 'EXPORT_SCOPES'
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
    if ('gaug_impl' in backbone or 'gaug_cfg' in backbone
            or str(backbone.get('type', '')).endswith('LocAtViT')):
        backbone.pop('gaug_impl', None)  # the deprecated alias of the key
        backbone['gaug_cfg'] = dict(
            backbone.get('gaug_cfg') or {}, impl='dense')
    init_default_scope(scope)
    model = MODELS.build(cfg.model)
    if checkpoint is not None:
        check_checkpoint_covers(model, checkpoint)
    return TensorOutput(model).eval(), cfg


@contextlib.contextmanager
def frozen_pos_embed(backbone: torch.nn.Module,
                     inputs: torch.Tensor) -> Iterator[None]:
    """The position embedding resampled to the export grid, as a constant.

    At a grid other than the training one the ViTs resample their position
    embedding with antialiased bicubic interpolation, which has no ONNX op;
    it depends on the (frozen) parameters only, so it is computed once for
    ``inputs``'s grid and the traced graph holds the result.
    """
    original = getattr(backbone, '_pos_embed_for', None)
    if original is None:
        yield
        return
    cache = {}

    def cached(hw):
        hw = tuple(int(s) for s in hw)
        if hw not in cache:
            cache[hw] = original(hw).detach()
        return cache[hw]

    backbone._pos_embed_for = cached
    try:
        with torch.no_grad():
            backbone(inputs)  # fill the cache outside the trace
        yield
    finally:
        del backbone._pos_embed_for


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
    dummy = torch.randn(1, 3, h, w)
    axes = dict(input={0: 'batch'}, output={0: 'batch'})
    backbone = module.model.backbone
    width = getattr(backbone, 'embed_dims', None)
    lowpass = (
        lowpass_as_matmul([width])
        if width is not None else contextlib.nullcontext())
    with lowpass, frozen_pos_embed(backbone, dummy), torch.no_grad():
        torch.onnx.export(
            module, (dummy, ),
            path,
            dynamo=False,
            opset_version=opset,
            input_names=['input'],
            output_names=['output'],
            dynamic_axes=axes if dynamic_batch else None)
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
