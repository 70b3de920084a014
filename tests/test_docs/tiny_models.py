"""The open_clip models the READMEs name, at the tiny size of the tests.

A README command names an open_clip model (``--model ViT-B-16-quickgelu``,
``--model EVA02-B-16``) and a weights file. The weights files the README
tests make are random-init models of :mod:`helpers.sources`' tiny
width, so the same names must build those tiny models in open_clip:
:func:`tiny_open_clip` registers, for every name of :data:`MODEL_NAMES`, the
real config at the tiny width (:func:`helpers.sources.
tiny_open_clip_config`: image depth, patch and input size, joint width,
activation, vocabulary as the real model) through open_clip's public
``add_model_config``, and puts open_clip's registry back afterwards. Two
more reductions, for time only (the README tests encode about 900,000
prompts): the text tower has :data:`TEXT_LAYERS` block and a context of
:data:`CONTEXT_LENGTH` tokens (no prompt of the shipped class names and
templates is longer: ``test_context_holds_every_prompt``). EVA02's timm
image trunk is registered in timm under ``<timm name>_readme_tiny``
(the real timm architecture at the tiny width), which the tiny config
names; the converters accept it as an EVA02 tower by that name.

Everything made while it is active (the placeholder files, the configs'
checkpoints of ``tests/test_configs/checkpoint_makers.py``) reads these
configs, so all of them agree.
"""
import contextlib
import json
import os
import os.path as osp
from typing import Dict, Iterator

from helpers import sources

__all__ = [
    'MODEL_NAMES', 'TEXT_LAYERS', 'CONTEXT_LENGTH', 'tiny_config',
    'tiny_open_clip'
]

# Every open_clip model a README command names.
MODEL_NAMES = ('ViT-B-16', 'ViT-B-16-quickgelu', 'ViT-L-14-quickgelu',
               'EVA02-B-16', 'EVA02-L-14-336')
TEXT_LAYERS = 1
CONTEXT_LENGTH = 32
TIMM_SUFFIX = '_readme_tiny'


def _register_tiny_timm(real: str) -> str:
    """Register ``real`` at the tiny width in timm (once); its name."""
    import timm
    from timm.models import register_model
    name = real + TIMM_SUFFIX
    if name in timm.list_models(name):
        return name
    tiny = dict(
        embed_dim=sources.TINY_WIDTH,
        num_heads=sources.TINY_HEADS,
        mlp_ratio=sources.TINY_MLP_RATIO)

    def entry(pretrained: bool = False, **kwargs):
        return timm.create_model(real, pretrained=False, **{**tiny, **kwargs})

    entry.__name__ = name
    entry.__qualname__ = name
    register_model(entry)
    return name


def tiny_config(model_name: str) -> Dict:
    """open_clip's config of ``model_name`` at the tiny size (module doc).
    Call it before :func:`tiny_open_clip` registers the name."""
    cfg = sources.tiny_open_clip_config(model_name)
    cfg['text_cfg'].update(layers=TEXT_LAYERS, context_length=CONTEXT_LENGTH)
    vision = cfg['vision_cfg']
    if vision.get('timm_model_name'):
        vision['timm_model_name'] = _register_tiny_timm(
            vision['timm_model_name'])
    return cfg


@contextlib.contextmanager
def tiny_open_clip(folder: str) -> Iterator[Dict[str, Dict]]:
    """Register the tiny configs of :data:`MODEL_NAMES` (written as
    ``folder/<name>.json``) while the context is active; yields them."""
    from open_clip import add_model_config, factory
    configs = {name: tiny_config(name) for name in MODEL_NAMES}
    os.makedirs(folder, exist_ok=True)
    for name, cfg in configs.items():
        with open(osp.join(folder, f'{name}.json'), 'w') as f:
            json.dump(cfg, f)
    paths, registered = list(factory._MODEL_CONFIG_PATHS), dict(
        factory._MODEL_CONFIGS)
    add_model_config(folder)
    try:
        yield configs
    finally:
        # open_clip has no public way to unregister a config
        factory._MODEL_CONFIG_PATHS[:] = paths
        factory._MODEL_CONFIGS = registered
