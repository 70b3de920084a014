"""Draw LocAtViT's learned Gaussian bias and attention for query patches.

Locality-Attending Vision Transformer (https://arxiv.org/abs/2603.04892):
every block adds a per-query Gaussian ``S[p, .]`` to its attention logits.
For every image and every query patch ``(row, col)`` of the patch grid this
writes two PNG grids, one row per block and one column per head, each map
over the network input with the query marked:

* ``<out-dir>/<name>_q<row>-<col>_gaug.png``: the Gaussian bias of the
  query, with the clamp of the distance terms off, as the paper visualises
  it (title: the per-axis variances and the amplitude alpha);
* ``<out-dir>/<name>_q<row>-<col>_attn.png``: the attention of the query
  over the patches, exactly as the model attends (its own clamp setting;
  prefix tokens receive the rest of the mass);

and ``<out-dir>/<name>_gaug.json`` with the variances and amplitudes.
Any config whose backbone is a ``mmlocat.LocAtViT`` (classifier,
segmentor, detector) and a checkpoint of the whole model or of the
backbone::

    python tools/analysis_tools/vis_gaug.py CONFIG CHECKPOINT IMG_OR_DIR \
        --queries 7,7 3,10 --out-dir vis_gaug/
"""
import argparse
import json
import os
import os.path as osp
from typing import Dict, List, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

import mmlocat  # noqa: F401  (registry node)
from mmlocat.apis import collect_images
from mmlocat.apis.analysis import build_analysis_model
from mmlocat.apis.cli import add_model_options
from mmlocat.utils.checkpoint_io import run_cli
from mmlocat.visualization import heatmap_overlay, save_grid

Query = Tuple[int, int]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('config', help='model config (LocAtViT backbone)')
    parser.add_argument('checkpoint', help='model or backbone checkpoint')
    parser.add_argument('images', nargs='+', help='image files or folders')
    parser.add_argument(
        '--queries',
        nargs='+',
        default=None,
        help='query patches as ROW,COL of the patch grid (default: the '
        'centre patch)')
    parser.add_argument(
        '--blocks',
        nargs='+',
        type=int,
        default=None,
        help='block indices to draw (default: all)')
    parser.add_argument('--out-dir', default='vis_gaug', help='output folder')
    add_model_options(parser, alpha=0.6)
    return parser.parse_args()


def parse_queries(specs: Sequence[str]) -> List[Query]:
    queries = []
    for spec in specs:
        parts = spec.split(',')
        if len(parts) != 2 or not all(p.strip().lstrip('-').isdigit()
                                      for p in parts):
            raise ValueError(
                f'--queries takes ROW,COL pairs of integers, got {spec!r}')
        queries.append((int(parts[0]), int(parts[1])))
    return queries


def gaug_blocks(backbone: torch.nn.Module) -> List[torch.nn.Module]:
    """The attention modules of the backbone's blocks; GAug required."""
    layers = getattr(backbone, 'layers', None)
    attns = [getattr(layer, 'attn', None) for layer in layers or []]
    if not attns or any(getattr(a, 'gaug', None) is None for a in attns):
        raise TypeError(
            f'vis_gaug needs a mmlocat.LocAtViT backbone with GAug in every '
            f'block, not {type(backbone).__name__}')
    return attns


class AttentionProbe:
    """Captures each block's attention input and output in one forward."""

    def __init__(self, attns: Sequence[torch.nn.Module]) -> None:
        self.inputs: Dict[int, tuple] = {}
        self.outputs: Dict[int, torch.Tensor] = {}
        self.handles = []
        for i, attn in enumerate(attns):
            self.handles.append(attn.register_forward_pre_hook(self._pre(i)))
            self.handles.append(attn.register_forward_hook(self._post(i)))

    def _pre(self, i):

        def hook(module, args):
            self.inputs[i] = (args[0].detach(), tuple(args[1]))

        return hook

    def _post(self, i):

        def hook(module, args, out):
            self.outputs[i] = out.detach()

        return hook

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


def query_maps(attn: torch.nn.Module, x: torch.Tensor, hw: Tuple[int, int],
               index: int) -> Dict[str, torch.Tensor]:
    """Bias (clamp off), attention and the attended values of one query.

    Args:
        attn: A ``GAugAttention`` (``qkv``, ``num_heads``, ``head_dims``,
            ``gaug``).
        x: Its input tokens (1, N, C).
        hw: The patch grid.
        index: The query's patch index (raster order, prefix excluded).

    Returns:
        ``bias`` (heads, H, W) without the clamp, ``attn`` (heads, N) over
        all tokens with the model's own bias, ``out`` (1, C) the query's
        attention output after the projection (to check against the
        model's), ``var`` (heads, 2) and ``alpha`` (heads,).
    """
    gaug = attn.gaug
    b, n, c = x.shape
    qkv = attn.qkv(x).reshape(b, n, 3, attn.num_heads, attn.head_dims)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
    prefix = gaug.num_prefix_tokens
    var, alpha = gaug.factors(q, hw)
    var_p, alpha_p = var[..., index:index + 1, :], alpha[...,
                                                         index:index + 1, :]

    def bias_row(clamp: bool) -> torch.Tensor:
        saved = gaug.clamp
        gaug.clamp = clamp
        try:
            rows, cols = gaug.axis_gauss(var_p, alpha_p, hw, start=index)
        finally:
            gaug.clamp = saved
        return (rows[..., :, None] * cols[..., None, :])[0, :, 0]

    model_bias = F.pad(bias_row(gaug.clamp).flatten(1), (prefix, 0))
    query = q[0, :, prefix + index, None]  # (heads, 1, d)
    logits = (query @ k[0].transpose(-1, -2))[:, 0] * attn.head_dims**-0.5
    weights = (logits + model_bias).float().softmax(-1).to(q.dtype)
    out = (weights[:, None] @ v[0]).transpose(0, 1).reshape(1, c)
    return dict(
        bias=bias_row(False),
        attn=weights,
        out=attn.proj(out),
        var=var_p[0, :, 0],
        alpha=alpha_p[0, :, 0, 0])


def check_against_model(maps: Dict[int, Dict], probe: AttentionProbe,
                        gaug: torch.nn.Module, index: int) -> None:
    """The attention drawn must be the one the model used: its weighted
    values equal the block's attention output for the query."""
    token = gaug.num_prefix_tokens + index
    for block, m in maps.items():
        want = probe.outputs[block][:, token].float()
        err = float((m['out'].float() - want).abs().max())
        if err > 1e-4 * max(1.0, float(want.abs().max())):
            raise RuntimeError(
                f'block {block}: the recomputed attention differs from the '
                f"model's by {err:.2e}; the attention module is not the "
                'GAugAttention this tool knows')


def _marked(panel: np.ndarray, query: Query, hw: Tuple[int, int]):
    """Outline the query's patch in white."""
    panel = panel.copy()
    h, w = panel.shape[:2]
    r0, r1 = query[0] * h // hw[0], (query[0] + 1) * h // hw[0]
    c0, c1 = query[1] * w // hw[1], (query[1] + 1) * w // hw[1]
    panel[r0:r1, [c0, max(c0, c1 - 1)]] = 255
    panel[[r0, max(r0, r1 - 1)], c0:c1] = 255
    return panel


def draw(img: np.ndarray, maps: Dict[int, Dict], query: Query,
         hw: Tuple[int, int], alpha: float, stem: str) -> List[str]:
    """Write the bias and attention grids of one query; return the paths."""
    written = []
    for kind in ('gaug', 'attn'):
        rows, labels = [], []
        for block, m in maps.items():
            cells = []
            for head in range(m['bias'].shape[0]):
                if kind == 'gaug':
                    heat = m['bias'][head].numpy()
                    var = m['var'][head].tolist()
                    name = (f'h{head} var {var[0]:.1f},{var[1]:.1f} '
                            f'a {float(m["alpha"][head]):.2f}')
                else:
                    heat = m['attn'][head, -hw[0] * hw[1]:].reshape(hw).numpy()
                    name = f'h{head} max {heat.max():.3f}'
                cells.append(
                    (name,
                     _marked(heatmap_overlay(img, heat, alpha), query, hw)))
            rows.append(cells)
            labels.append(f'block {block}')
        out_file = f'{stem}_q{query[0]}-{query[1]}_{kind}.png'
        title = ('Gaussian bias (clamp off)'
                 if kind == 'gaug' else 'attention over patches')
        save_grid(
            rows,
            out_file,
            row_labels=labels,
            title=f'{title}, query patch {query}')
        written.append(out_file)
    return written


def main() -> None:
    args = parse_args()
    if not 0 <= args.alpha <= 1:
        raise ValueError(f'--alpha must be in [0, 1], got {args.alpha}')
    queries = parse_queries(args.queries) if args.queries else None
    images = collect_images(args.images)
    model, _, prepare, _ = build_analysis_model(args.config, args.checkpoint,
                                                args.device, args.cfg_options)
    attns = gaug_blocks(model.backbone)
    blocks = args.blocks if args.blocks is not None else range(len(attns))
    for block in blocks:
        if not 0 <= block < len(attns):
            raise ValueError(f'--blocks: {block} is not a block index of a '
                             f'{len(attns)}-block backbone')
    os.makedirs(args.out_dir, exist_ok=True)
    written = []
    for i, path in enumerate(tqdm(images, desc='GAug maps')):
        inputs, img = prepare(path)
        probe = AttentionProbe(attns)
        try:
            with torch.no_grad():
                model.backbone(inputs)
        finally:
            probe.remove()
        hw = probe.inputs[0][1]
        chosen = queries or [(hw[0] // 2, hw[1] // 2)]
        for r, c in chosen:
            if not (0 <= r < hw[0] and 0 <= c < hw[1]):
                raise ValueError(f'query patch ({r}, {c}) is outside the '
                                 f'{hw[0]}x{hw[1]} patch grid of {path}')
        stem = osp.join(args.out_dir, osp.splitext(osp.basename(path))[0])
        if any(w.startswith(stem + '_q') for w in written):
            stem = f'{stem}_{i}'  # the same file name in two folders
        record = dict(image=path, grid=list(hw), queries=[])
        for query in chosen:
            index = query[0] * hw[1] + query[1]
            with torch.no_grad():
                maps = {
                    b: query_maps(attns[b], *probe.inputs[b], index)
                    for b in blocks
                }
            check_against_model(maps, probe, attns[0].gaug, index)
            written += draw(img, maps, query, hw, args.alpha, stem)
            record['queries'].append(
                dict(
                    patch=list(query),
                    blocks={
                        str(b):
                        dict(var=m['var'].tolist(), alpha=m['alpha'].tolist())
                        for b, m in maps.items()
                    }))
        with open(stem + '_gaug.json', 'w', encoding='utf-8') as f:
            json.dump(record, f, indent=1)
    for path in written:
        print(path)


if __name__ == '__main__':
    run_cli('vis_gaug.py', main)
