"""The checkpoints the shipped configs name, made the way their READMEs say.

:data:`MAKERS` is the one table: every checkpoint path a shipped config
names (``init_cfg=dict(type='Pretrained', checkpoint=...)``, mmseg's
``pretrained``, ``load_from``, a text tower's ``weights``) maps to the
maker that writes that file the way the config family's README tells the
user to: the real converter tool (``tools/model_converters/*``, run
in-process) on a random-init source model of the kind the README names
(:mod:`helpers.sources`: timm, torchvision, open_clip, DINO), or a
training checkpoint of the recipe the README says to train. A config whose
checkpoint has no entry fails ``test_config_checkpoints.py``: add one here.

Everything is tiny (:func:`helpers.sources.tiny_arch`: the width
shrinks, depth, patch and input sizes and joint widths stay the real
ones), and :func:`prepare_model` shrinks a config the same way
(:func:`helpers.shrink.shrink_model`), so each
config loads the made file with its own ``out_indices``, ``final_norm``,
``frozen_stages``, ``img_size`` and loading options.
"""
import contextlib
import copy
import functools
import glob
import importlib.util
import io
import json
import os
import os.path as osp
import re
import sys
from typing import Callable, Dict, List, Optional, Tuple
from unittest import mock

import numpy as np
import torch
from helpers import sources
from helpers.harness import shipped_config as load_config  # noqa: F401
from helpers.readme_loops import expanded_commands
from helpers.shrink import TOWER_KEYS, shrink_model
from mmengine.config import Config

from mmlocat.utils.pretrained import is_pretrained_cfg

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
THIS_FILE = osp.relpath(osp.abspath(__file__), REPO)

Maker = Callable[['Made', str], None]


# ----------------------------------------------------------------- configs
def shipped_configs() -> List[str]:
    """Every shipped config leaf (``configs/**.py`` outside ``_base_``),
    relative to the repository root."""
    found = glob.glob(osp.join(REPO, 'configs', '**', '*.py'), recursive=True)
    return sorted(
        osp.relpath(p, REPO) for p in found
        if '_base_' not in osp.relpath(p, REPO).split(os.sep))


def checkpoint_refs(cfg: Config) -> List[Tuple[str, str]]:
    """``(where, path)`` of every checkpoint ``cfg`` names: ``Pretrained``
    checkpoints anywhere in the model, mmseg's ``pretrained``, a text
    tower's ``weights`` and ``load_from``."""
    refs = []

    def walk(node, where):
        if isinstance(node, dict):
            if is_pretrained_cfg(node) and node.get('checkpoint'):
                refs.append((f'{where}.checkpoint', node['checkpoint']))
            for key in ('pretrained', 'weights'):
                if isinstance(node.get(key), str):
                    refs.append((f'{where}.{key}', node[key]))
            for key, value in node.items():
                walk(value, f'{where}.{key}')
        elif isinstance(node, (list, tuple)):
            for i, value in enumerate(node):
                walk(value, f'{where}[{i}]')

    walk(cfg.get('model'), 'model')
    if cfg.get('load_from'):
        refs.append(('load_from', cfg.load_from))
    return refs


def readme_test_commands() -> List[Tuple[str, str, str]]:
    """``(readme, config, checkpoint)`` of every ``tools/test.py CONFIG
    checkpoints/...`` command in the READMEs (the README and the config
    families'; shell loops expanded); outputs of the user's own runs
    (``work_dirs/``) are not checkpoints a README makes."""
    pattern = re.compile(r'tools/test\.py\s+(configs/\S+\.py)\s+'
                         r'(checkpoints/\S+)')
    found = []
    readmes = ['README.md'] + sorted(
        osp.relpath(p, REPO)
        for p in glob.glob(osp.join(REPO, 'configs', '*', 'README.md')))
    for readme in readmes:
        with open(osp.join(REPO, readme), encoding='utf-8') as f:
            # a loop's every expansion (configs/last/README.md's are)
            commands = '\n'.join(expanded_commands(f.read()))
        for config, checkpoint in pattern.findall(commands):
            found.append((readme, config, checkpoint))
    return sorted(set(found))


def _tower(model: dict) -> dict:
    return next(model[k] for k in TOWER_KEYS if isinstance(model.get(k), dict))


def _clip_record(tower: dict) -> dict:
    """The CLIP provenance the tower's checkpoint records (what
    ``dump_text_embeddings.py`` records for the same CLIP)."""
    from mmlocat.utils.records import read_checkpoint_meta
    init = tower.get('init_cfg')
    if not is_pretrained_cfg(init):
        return {}
    record = read_checkpoint_meta(init['checkpoint']).get('clip', {})
    return {k: record[k] for k in ('name', 'weights', 'sha256') if k in record}


def write_data_files(cfg: Config,
                     seed: int = 0,
                     keep_existing: bool = False) -> None:
    """Write the text-embedding files (and base-class lists) the model
    reads when it is built, at the config's paths (relative to the working
    directory), with the config's classes, the tower's joint width and the
    tower checkpoint's CLIP record (``keep_existing``: leave files that
    exist, e.g. written by a README command)."""
    from mmlocat import text as te
    model = cfg.model
    tower = _tower(model)
    dims = tower['arch'].get('output_dims')
    record = _clip_record(tower) or None
    rng = np.random.default_rng(seed)

    def write(path, names, **row_map):
        if keep_existing and osp.isfile(path):
            return
        te.save_text_embeddings(path, rng.normal(size=(len(names), dims)),
                                names, record, **row_map)

    if model.get('text_embeddings'):  # mmlocat.ZeroShotSegmentor
        # one row per name of the config's class-name file (as
        # dump_text_embeddings.py --seg-config writes it)
        queries, query_class = te.query_map(te.zero_shot_class_name_lines(cfg))
        write(
            model.text_embeddings,
            queries,
            query_class=query_class,
            classes=te.zero_shot_classes(cfg))
    head = (model.get('roi_head') or {}).get('bbox_head') or {}
    if head.get('text_embeddings'):  # mmlocat.CosineSimBBoxHead
        if dims is None:
            dims = head['fc_out_channels']
        if head.get('class_names') is not None:
            names = te.resolve_class_names(head['class_names'])
        else:  # read from the file, as dumped from the annotations
            count = model.roi_head.get('mask_head', {}).get('num_classes', 20)
            names = [f'category_{i}' for i in range(count)]
        base = head.get('base_class_names')
        if isinstance(base, str) and base.endswith('.json') and not (
                keep_existing and osp.isfile(base)):
            os.makedirs(osp.dirname(osp.abspath(base)), exist_ok=True)
            with open(base, 'w', encoding='utf-8') as f:
                json.dump(names[:len(names) * 2 // 3], f)
        write(head['text_embeddings'], names + [te.BACKGROUND])


def build_model(cfg: Config):
    """The model of ``cfg`` from the registries, as the Runner builds it."""
    from mmengine.registry import MODELS, init_default_scope
    init_default_scope(cfg.get('default_scope', 'mmengine'))
    return MODELS.build(cfg.model)


def prepare_model(cfg: Config, made: 'Made'):
    """Make every checkpoint ``cfg`` names, shrink it, write its data
    files and build its model (not yet initialised). Paths in ``cfg`` are
    relative to ``made.root``, the working directory while this runs."""
    for _, path in checkpoint_refs(cfg):
        made.get(path)
    shrink_model(cfg)
    write_data_files(cfg, keep_existing=made.keep_data)
    return build_model(cfg)


# ------------------------------------------------------------------- tools
def run_tool(script: str, *args: str) -> str:
    """Run ``tools/model_converters/<script>``'s ``main()`` in this process
    with ``args`` (as its command line); returns what it printed.

    Raises:
        AssertionError: If the tool exits with an error (its message).
    """
    path = osp.join(REPO, 'tools', 'model_converters', script)
    spec = importlib.util.spec_from_file_location(
        '_tool_' + osp.splitext(script)[0], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = io.StringIO()
    try:
        with mock.patch.object(sys, 'argv', [path, *args]), \
                contextlib.redirect_stdout(out):
            module.main()
    except SystemExit as err:
        raise AssertionError(f'{script} {" ".join(args)}: {err}') from None
    return out.getvalue()


def save_training_checkpoint(model, cfg: Config, path: str) -> None:
    """What mmengine's Runner saves (``meta['cfg']`` and ``state_dict``),
    with the CLIP records :class:`mmlocat.RecordHook` adds to a
    ``CLIPContrastive`` run's checkpoints."""
    from mmengine.runner.checkpoint import save_checkpoint, weights_to_cpu

    from mmlocat.utils.records import CLIP_RUN_KEY
    text = Config(cfg.to_dict(), format_python_code=False).pretty_text
    meta = dict(cfg=text, epoch=1, iter=1)
    if hasattr(model, 'clip_provenance'):
        meta[CLIP_RUN_KEY] = copy.deepcopy(model.clip_provenance)
    save_checkpoint(
        dict(meta=meta, state_dict=weights_to_cpu(model.state_dict())), path)


# ------------------------------------------------------------------ makers
class Made:
    """The made files under ``root`` (the working directory the configs'
    relative paths resolve in), each made once.

    Args:
        root: The working directory.
        makers: The makers to use (default :data:`MAKERS`). A name without
            a maker that already exists under ``root`` (written by a README
            command) is taken as it is.
    """

    def __init__(self,
                 root: str,
                 makers: Optional[Dict[str, 'Maker']] = None) -> None:
        self.root = root
        self.makers = MAKERS if makers is None else makers
        # prepare_model keeps the data files that exist (a README root)
        self.keep_data = makers is not None
        self._done: Dict[str, str] = {}
        self._making: List[str] = []

    def get(self, name: str) -> str:
        """The absolute path of checkpoint ``name``, made on first use."""
        if name in self._done:
            return self._done[name]
        path = osp.join(self.root, name)
        if name not in self.makers:
            if osp.isfile(path):
                self._done[name] = path
                return path
            raise KeyError(missing_maker_message('a maker', [name]))
        if name in self._making:
            raise RuntimeError(f'makers depend on each other: {self._making}')
        self._making.append(name)
        os.makedirs(osp.dirname(path), exist_ok=True)
        cwd = os.getcwd()
        os.chdir(self.root)
        try:
            self.makers[name](self, path)
        finally:
            os.chdir(cwd)
            self._making.pop()
        assert osp.isfile(path), f'the maker of {name} wrote nothing'
        self._done[name] = path
        return path

    def source(self, name: str, state_dict: Callable[[], dict]) -> str:
        """A source state dict saved as ``sources/<name>`` (once)."""
        path = osp.join(self.root, 'sources', name)
        if not osp.isfile(path):
            os.makedirs(osp.dirname(path), exist_ok=True)
            torch.save(state_dict(), path)
        return path


def converted(tool: str, source: str, state_dict: Callable[[], dict], *args:
              str) -> Maker:
    """``tools/model_converters/TOOL SRC DST *ARGS``, ``SRC`` the source
    ``state_dict()`` saved as ``sources/SOURCE`` (once)."""

    def make(made: Made, dst: str) -> None:
        run_tool(tool, made.source(source, state_dict), dst, *args)

    return make


def converted_timm(model_name: str, gaug: bool = False) -> Maker:
    """``locat2mmlocat.py`` on a timm ViT / DeiT (``gaug``: the released
    LocAtViT, a timm ViT with GAug)."""
    return converted(
        'locat2mmlocat.py', model_name + ('_locat' if gaug else '') + '.pth',
        functools.partial(sources.timm_vit_state_dict, model_name, gaug=gaug))


def converted_torchvision(model_name: str) -> Maker:
    """``last_vit2mmlocat.py`` on a torchvision ViT (the LaSt-ViT release)."""
    return converted(
        'last_vit2mmlocat.py', f'torchvision_{model_name}.pth',
        functools.partial(sources.torchvision_vit_state_dict, model_name))


def converted_dino(model_name: str) -> Maker:
    """``dino2mmlocat.py`` on DINO's ViT (timm's layout, no head)."""
    return converted(
        'dino2mmlocat.py', f'dino_{model_name}.pth',
        functools.partial(
            sources.timm_vit_state_dict, model_name, num_classes=0))


def open_clip_weights(model_name: str) -> Maker:
    """An open_clip checkpoint of ``model_name`` (image and text towers)."""

    def make(made: Made, dst: str) -> None:
        torch.save(sources.open_clip_state_dict(model_name), dst)

    return make


def converted_clip(weights: str, model_name: str) -> Maker:
    """``clip2mmlocat.py WEIGHTS DST --model-config MODEL_NAME.json``: the
    converter checks the tower's width against the open_clip config, so it
    reads the tiny config (saved under the model's name, which it records)
    instead of ``--model MODEL_NAME``."""

    def make(made: Made, dst: str) -> None:
        config = osp.join(made.root, 'sources', f'{model_name}.json')
        os.makedirs(osp.dirname(config), exist_ok=True)
        with open(config, 'w', encoding='utf-8') as f:
            json.dump(sources.tiny_open_clip_config(model_name), f)
        run_tool('clip2mmlocat.py', made.get(weights), dst, '--model-config',
                 config)

    return make


def converted_eva02(weights: str, model_name: str) -> Maker:
    """``eva02_clip2mmlocat.py WEIGHTS DST --model MODEL_NAME``."""

    def make(made: Made, dst: str) -> None:
        run_tool('eva02_clip2mmlocat.py', made.get(weights), dst, '--model',
                 model_name)

    return make


def trained(config: str, converter: str = '') -> Maker:
    """The checkpoint a run of ``config`` saves (its model initialised as
    the recipe says, shrunk like every config here), through ``converter``
    (a ``tools/model_converters`` script taking ``SRC DST``) if given."""

    def make(made: Made, dst: str) -> None:
        cfg = load_config(config)
        model = prepare_model(cfg, made)
        model.init_weights()
        work = dst + '.training.pth' if converter else dst
        save_training_checkpoint(model, cfg, work)
        if converter:
            run_tool(converter, work, dst)

    return make


MAKERS: Dict[str, Maker] = {
    # configs/locat/README.md "Pretrained weights": the released timm
    # LocAtViTs through locat2mmlocat.py; the ViT twins: a timm ViT / DeiT
    # through the same converter; LocAtViT-S: train its recipe.
    'checkpoints/locat-t_in1k.pth':
    converted_timm('deit_tiny_patch16_224', gaug=True),
    'checkpoints/locat-b_in1k.pth':
    converted_timm('vit_base_patch16_224', gaug=True),
    'checkpoints/locat-s_in1k.pth':
    trained('configs/locat/locat-s_8xb128_in1k.py'),
    'checkpoints/vit-t_in1k.pth':
    converted_timm('deit_tiny_patch16_224'),
    'checkpoints/vit-s_in1k.pth':
    converted_timm('deit_small_patch16_224'),
    'checkpoints/vit-b_in1k.pth':
    converted_timm('vit_base_patch16_224'),
    # configs/ovd/README.md: F-ViT on LocAtViT-B/16 (LocAt weights)
    'checkpoints/locat-b16_mmlocat.pth':
    converted_timm('vit_base_patch16_224', gaug=True),
    # configs/last/README.md "Pretrained weights": the torchvision release
    # through last_vit2mmlocat.py; the UperNet twins: train the ViT-B recipe.
    'checkpoints/last-b_in1k.pth':
    converted_torchvision('vit_b_16'),
    'checkpoints/vit-b_8xb512_in1k.pth':
    trained('configs/last/vit-b_8xb512_in1k.py'),
    'checkpoints/dino-s_mmlocat.pth':
    converted_dino('vit_small_patch16_224'),
    # the LaSt-ViT authors' DINO release (a main_dino.py training checkpoint)
    'checkpoints/last-dino0080-s_mmlocat.pth':
    converted('dino2mmlocat.py', 'dino0080.pth',
              sources.dino_training_checkpoint),
    # "No supervised ViT-S weights of the paper are public: train or convert
    # your own": a timm DeiT-S through locat2mmlocat.py (LaSt adds no
    # parameters, so the LaSt-ViT-S file has the same keys).
    'checkpoints/vit-s_mmlocat.pth':
    converted_timm('deit_small_patch16_224'),
    'checkpoints/last-s_mmlocat.pth':
    converted_timm('deit_small_patch16_224'),
    # configs/last/README.md "LaSt-CLIP": the open_clip weights (text towers
    # of the clip_* recipes, sources of the converters) ...
    'checkpoints/ViT-B-16.pt':
    open_clip_weights('ViT-B-16-quickgelu'),
    'checkpoints/ViT-L-14.pt':
    open_clip_weights('ViT-L-14-quickgelu'),
    'checkpoints/open_clip_EVA02-B-16.bin':
    open_clip_weights('EVA02-B-16'),
    'checkpoints/open_clip_EVA02-L-14-336.bin':
    open_clip_weights('EVA02-L-14-336'),
    # configs/last/README.md "Zero-shot": MetaCLIP's metaclip_fullcc
    # weights (open_clip's ViT-B-16-quickgelu / ViT-L-14-quickgelu) ...
    'checkpoints/b16_fullcc2.5b.pt':
    open_clip_weights('ViT-B-16-quickgelu'),
    'checkpoints/l14_fullcc2.5b.pt':
    open_clip_weights('ViT-L-14-quickgelu'),
    # ... their image towers (configs/ovd/README.md "Backbone weights") ...
    'checkpoints/clip-vit-b16_mmlocat.pth':
    converted_clip('checkpoints/ViT-B-16.pt', 'ViT-B-16-quickgelu'),
    'checkpoints/clip-vit-l14_mmlocat.pth':
    converted_clip('checkpoints/ViT-L-14.pt', 'ViT-L-14-quickgelu'),
    'checkpoints/eva02-clip-b16_mmlocat.pth':
    converted_eva02('checkpoints/open_clip_EVA02-B-16.bin', 'EVA02-B-16'),
    'checkpoints/eva02-clip-l14-336_mmlocat.pth':
    converted_eva02('checkpoints/open_clip_EVA02-L-14-336.bin',
                    'EVA02-L-14-336'),
    'checkpoints/metaclip-b16-fullcc_mmlocat.pth':
    converted_clip('checkpoints/b16_fullcc2.5b.pt', 'ViT-B-16-quickgelu'),
    'checkpoints/metaclip-l14-fullcc_mmlocat.pth':
    converted_clip('checkpoints/l14_fullcc2.5b.pt', 'ViT-L-14-quickgelu'),
    # ... and the LaSt-CLIP runs (and their same-recipe CLS twins) through
    # lastclip2mmlocat.py.
    'checkpoints/last-clip-vit-b16_mmlocat.pth':
    trained('configs/last/clip_last-b16_8xb64_cc3m.py', 'lastclip2mmlocat.py'),
    'checkpoints/cls-clip-vit-b16_mmlocat.pth':
    trained('configs/last/clip_cls-b16_8xb64_cc3m.py', 'lastclip2mmlocat.py'),
    'checkpoints/last-clip-vit-l14_mmlocat.pth':
    trained('configs/last/clip_last-l14_8xb64_cc3m.py', 'lastclip2mmlocat.py'),
    'checkpoints/cls-clip-vit-l14_mmlocat.pth':
    trained('configs/last/clip_cls-l14_8xb64_cc3m.py', 'lastclip2mmlocat.py'),
    'checkpoints/last-eva02-clip-b16_mmlocat.pth':
    trained('configs/last/clip_last-eva02-b16_8xb64_cc3m.py',
            'lastclip2mmlocat.py'),
    'checkpoints/cls-eva02-clip-b16_mmlocat.pth':
    trained('configs/last/clip_cls-eva02-b16_8xb64_cc3m.py',
            'lastclip2mmlocat.py'),
    'checkpoints/last-eva02-clip-l14-336_mmlocat.pth':
    trained('configs/last/clip_last-eva02-l14-336_8xb64_cc3m.py',
            'lastclip2mmlocat.py'),
    'checkpoints/cls-eva02-clip-l14-336_mmlocat.pth':
    trained('configs/last/clip_cls-eva02-l14-336_8xb64_cc3m.py',
            'lastclip2mmlocat.py'),
    # No LaSt-CLIP recipe of a MetaCLIP tower ships (the zero-shot README
    # says so): the B/16 / L/14 recipes' run, the same architecture, stands
    # for it.
    'checkpoints/last-metaclip-b16-fullcc_mmlocat.pth':
    trained('configs/last/clip_last-b16_8xb64_cc3m.py', 'lastclip2mmlocat.py'),
    'checkpoints/last-metaclip-l14-fullcc_mmlocat.pth':
    trained('configs/last/clip_last-l14_8xb64_cc3m.py', 'lastclip2mmlocat.py'),
}

MAKER_KINDS = ('converted_timm', 'converted_torchvision', 'converted_dino',
               'open_clip_weights', 'converted_clip', 'converted_eva02',
               'trained', 'converted')


def missing_maker_message(config: str, names: List[str]) -> str:
    """What to add to :data:`MAKERS` for ``names``."""
    lines = [
        f'{config} names checkpoint(s) with no maker: {names}. Add to '
        f'MAKERS in {THIS_FILE}, one line per file, the way the config '
        "family's README tells the user to make it, e.g.:"
    ]
    lines += [f"    '{n}': MAKER(...)," for n in names]
    lines.append(f'with MAKER one of {", ".join(MAKER_KINDS)} (e.g. '
                 "converted_clip('checkpoints/ViT-B-16.pt', 'ViT-B-16'), "
                 "trained('configs/last/clip_last-b16_8xb64_cc3m.py',"
                 " 'lastclip2mmlocat.py')), or a new maker beside them for a "
                 'new converter')
    return '\n'.join(lines)


def loaded_from(model, cfg: Config) -> List[str]:
    """Check that every tower loaded its checkpoint: each of its tensors
    that the checkpoint holds (same name after the prefix, same shape)
    equals the stored one. Returns the tower keys compared.

    Raises:
        AssertionError: Naming the tensors that differ.
    """
    from mmlocat.utils.checkpoint_io import read_state_dict
    compared = []
    for key in TOWER_KEYS:
        tower_cfg = cfg.model.get(key)
        init = (tower_cfg or {}).get('init_cfg')
        if not is_pretrained_cfg(init):
            continue
        prefix = init.get('prefix') or ''
        stored = {
            k[len(prefix):]: v
            for k, v in read_state_dict(init['checkpoint']).items()
            if k.startswith(prefix)
        }
        own = getattr(model, key).state_dict()
        same = [
            k for k, v in own.items()
            if k in stored and stored[k].shape == v.shape
        ]
        differ = [k for k in same if not torch.equal(own[k], stored[k])]
        assert not differ, (f'{key} was not loaded from {init["checkpoint"]}:'
                            f' {differ[:5]} differ')
        compared += [f'{key}.{k}' for k in same]
    return compared
