"""Parameters and FLOPs of configs, for the model-zoo metafiles.

For a config, the model is built from ``cfg.model`` (random init, no
weights read) and run once, on torch's fake tensors (shapes only, no
compute), in eval mode on a
``(1, 3, H, W)`` input under :class:`torch.utils.flop_counter.FlopCounterMode`
(torch's own dispatch-level counter: matmuls, convolutions and
scaled-dot-product attention; element-wise ops are not counted, as in
fvcore / mmengine). ``FLOPs`` is reported as multiply-accumulates (the
counter's value / 2), the convention of OpenMMLab metafiles. What runs:

* segmentors: ``model(x, mode='tensor')`` (backbone, neck, decode head;
  the auxiliary head is training only), at the config's ``crop_size``;
* classifiers: ``model(x, mode='tensor')`` at the backbone's ``img_size``
  (``extract_feat`` when the model has no head);
* detectors: backbone + neck (what ``extract_feat`` runs) at the config's
  ``image_size``, for FLOPs and Parameters both (``Counted: backbone +
  neck``): the RoI stage depends on the proposals, and F-ViT's text
  classifier is built from a dataset's embedding file.

``Parameters`` counts every parameter of the counted model (frozen ones
too). Attention runs on PyTorch's math path so that its two matmuls are
counted.

Usage::

    python tools/analysis_tools/get_flops.py CONFIG [CONFIG ...] [--shape H W]
    python tools/analysis_tools/get_flops.py --metafiles configs/*/metafile.yml
        [--write | --check] [--only NAME ...]

``--write`` stores the numbers in each Model's ``Metadata`` (``Parameters``,
``FLOPs``, ``FLOPs Input``); ``--check`` exits non-zero when a metafile
disagrees with a fresh count.
"""
import argparse
import os.path as osp
import re
import sys
from typing import Dict, List, Optional, Tuple

import torch
import yaml
from mmengine.config import Config
from mmengine.registry import init_default_scope
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._python_dispatch import (TorchDispatchMode,
                                          _disable_current_modes)
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import FlopCounterMode

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def input_shape(cfg: Config) -> Tuple[int, int]:
    """The (H, W) the metafile numbers are stated at (see module doc)."""
    for key in ('crop_size', 'image_size'):
        if cfg.get(key):
            h, w = cfg[key]
            return int(h), int(w)
    size = cfg.model.backbone.get('img_size', 224)
    size = (size, size) if isinstance(size, int) else size
    return int(size[0]), int(size[1])


class _FeatureExtractor(torch.nn.Module):
    """A detector's backbone and neck: what ``extract_feat`` runs."""

    def __init__(self, backbone: torch.nn.Module,
                 neck: Optional[torch.nn.Module]):
        super().__init__()
        self.backbone = backbone
        self.neck = neck

    def forward(self, x: torch.Tensor):
        feats = self.backbone(x)
        return self.neck(feats) if self.neck is not None else feats


class _AllClear(TorchDispatchMode):
    """Inside fake-tensor counting: input guards see an all-clear.

    A fake tensor has no values, so a guard such as
    ``if bool(x.isnan().any()): raise`` or
    ``if not bool(torch.isfinite(x).all()): raise`` cannot be evaluated.
    Full ``any`` / ``all`` reductions of a fake tensor return a real ``False``
    / ``True`` (no FLOPs either way), and ops on real tensors only run for
    real.
    """
    CLEAR = {
        torch.ops.aten.any.default: False,
        torch.ops.aten.all.default: True
    }

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        leaves = [
            a for a in tree_flatten((args, kwargs))[0]
            if isinstance(a, torch.Tensor)
        ]
        is_fake = [isinstance(a, FakeTensor) for a in leaves]
        with _disable_current_modes():
            if func in self.CLEAR and all(is_fake):
                return torch.tensor(self.CLEAR[func])
            if leaves and not any(is_fake):
                return func(*args, **kwargs)
        return func(*args, **kwargs)


def build(model_cfg: dict) -> Tuple[torch.nn.Module, Optional[str]]:
    """The counted model and, for detectors, what part of it is counted."""
    from mmengine.registry import MODELS
    model_cfg = model_cfg.copy()
    # no weights are read (and none exist here): counts need the graph only
    model_cfg.pop('init_cfg', None)
    if 'rpn_head' in model_cfg or 'roi_head' in model_cfg:
        backbone = MODELS.build(model_cfg['backbone'])
        neck = model_cfg.get('neck')
        neck = MODELS.build(neck) if neck else None
        return _FeatureExtractor(backbone, neck), 'backbone + neck'
    return MODELS.build(model_cfg), None


def _forward(model: torch.nn.Module, x: torch.Tensor) -> None:
    from mmengine.model import BaseModel
    if isinstance(model, _FeatureExtractor):
        model(x)
    elif getattr(model, 'head', True) is None:  # a classifier without head
        model.extract_feat(x)
    elif isinstance(model, BaseModel):
        model(x, mode='tensor')
    else:
        model(x)


def count(config: str,
          shape: Optional[Tuple[int, int]] = None) -> Dict[str, object]:
    """Parameters and FLOPs (multiply-accumulates) of ``config``'s model."""
    if not osp.isfile(config):
        raise FileNotFoundError(f'config not found: {config}')
    cfg = Config.fromfile(config)
    init_default_scope(cfg.get('default_scope', 'mmengine'))
    shape = shape or input_shape(cfg)
    model, part = build(cfg.model)  # random init, on the CPU
    model.eval()
    params = sum(p.numel() for p in model.parameters())
    # The forward runs on fake tensors (shapes only, no compute); attention
    # on the math path, so its matmuls are counted like any other.
    with FakeTensorMode(allow_non_fake_inputs=True), \
            sdpa_kernel(SDPBackend.MATH):
        x = torch.empty(1, 3, *shape)
        counter = FlopCounterMode(display=False)
        with counter, _AllClear(), torch.no_grad():
            _forward(model, x)
    stats = dict(
        Parameters=int(params),
        FLOPs=int(counter.get_total_flops() // 2),
        **{'FLOPs Input': f'{shape[0]}x{shape[1]}'})
    if part:
        stats['Counted'] = part
    return stats


def _metafile_models(path: str) -> List[dict]:
    with open(path) as f:
        return yaml.safe_load(f)['Models']


def _write(path: str, stats: Dict[str, dict]) -> None:
    """Update ``Metadata`` in place, keeping the file's header comment."""
    with open(path) as f:
        text = f.read()
    header = re.match(r'(?:#[^\n]*\n)*', text).group(0)
    meta = yaml.safe_load(text)
    for model in meta['Models']:
        if model['Name'] in stats:
            model.setdefault('Metadata', {}).update(stats[model['Name']])
    with open(path, 'w') as f:
        f.write(header)
        yaml.safe_dump(meta, f, sort_keys=False, allow_unicode=True, width=79)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('configs', nargs='*', help='config files')
    parser.add_argument(
        '--shape', type=int, nargs=2, metavar=('H', 'W'), help='input size')
    parser.add_argument(
        '--metafiles', nargs='+', default=[], help='metafile.yml files')
    parser.add_argument('--only', nargs='+', help='model names to count')
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument('--write', action='store_true', help='store the numbers')
    mode.add_argument(
        '--check',
        action='store_true',
        help='fail when a metafile disagrees with a fresh count')
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if not args.configs and not args.metafiles:
        raise SystemExit('get_flops: give CONFIG files or --metafiles')
    for config in args.configs:
        stats = count(config, tuple(args.shape) if args.shape else None)
        print(config, stats)
    mismatches = []
    for path in args.metafiles:
        stats = {}
        for model in _metafile_models(path):
            if args.only and model['Name'] not in args.only:
                continue
            stats[model['Name']] = count(osp.join(REPO, model['Config']))
            print(model['Name'], stats[model['Name']], flush=True)
            if args.check:
                stated = model.get('Metadata', {})
                for key, value in stats[model['Name']].items():
                    if stated.get(key) != value:
                        mismatches.append(f'{path}: {model["Name"]}: {key} '
                                          f'is {stated.get(key)!r}, counted '
                                          f'{value!r}')
        if args.write:
            _write(path, stats)
    if args.only and args.metafiles:
        missing = set(args.only) - {
            m['Name']
            for p in args.metafiles
            for m in _metafile_models(p)
        }
        if missing:
            raise SystemExit(f'get_flops: no model named {sorted(missing)}')
    for line in mismatches:
        print(line, file=sys.stderr)
    return 1 if mismatches else 0


if __name__ == '__main__':
    sys.exit(main())
