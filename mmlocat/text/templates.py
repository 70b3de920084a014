"""Prompt templates and prompt styles of CLIP text embeddings.

CLIP's zero-shot classifier ("Learning Transferable Visual Models From
Natural Language Supervision", https://arxiv.org/abs/2103.00020) puts each
class name into prompt templates; F-ViT (CLIPSelf,
https://arxiv.org/abs/2310.01403) uses its own 63 templates with its own
name processing (``prompt_style='fvit'``), zero-shot segmentation (SCLIP,
https://github.com/wangf3014/SCLIP) CLIP's 80 ImageNet ones filled plainly
(``prompt_style='plain'``). An embedding file's sidecar records the
:data:`TEMPLATE_SETS` key and the prompt style it was written with.
"""
from typing import List, Sequence

__all__ = [
    'CLIP_TEMPLATES', 'FVIT_TEMPLATES', 'IMAGENET_TEMPLATES',
    'PROMPT_TEMPLATES', 'SINGLE_TEMPLATE', 'TEMPLATE_SETS', 'PROMPT_STYLES',
    'fvit_prompts', 'plain_prompts', 'class_prompts', 'check_templates'
]

# CLIP's ImageNet-style prompt set (63 templates); the prompt style of
# ``prompt_style='plain'``. Each must contain exactly one '{}'.
CLIP_TEMPLATES = (
    'a bad photo of a {}.', 'a photo of many {}.', 'a sculpture of a {}.',
    'a photo of the hard to see {}.', 'a low resolution photo of the {}.',
    'a rendering of a {}.', 'graffiti of a {}.', 'a bad photo of the {}.',
    'a cropped photo of the {}.', 'a tattoo of a {}.', 'the embroidered {}.',
    'a photo of a hard to see {}.', 'a bright photo of a {}.',
    'a photo of a clean {}.', 'a photo of a dirty {}.',
    'a dark photo of the {}.', 'a drawing of a {}.', 'a photo of my {}.',
    'the plastic {}.', 'a photo of the cool {}.', 'a close-up photo of a {}.',
    'a black and white photo of the {}.', 'a painting of the {}.',
    'a painting of a {}.', 'a pixelated photo of the {}.',
    'a sculpture of the {}.', 'a bright photo of the {}.',
    'a cropped photo of a {}.', 'a plastic {}.', 'a photo of the dirty {}.',
    'a jpeg corrupted photo of a {}.', 'a blurry photo of the {}.',
    'a photo of the {}.', 'a good photo of the {}.', 'a rendering of the {}.',
    'a {} in a video game.', 'a photo of one {}.', 'a doodle of a {}.',
    'a close-up photo of the {}.', 'a photo of a {}.', 'the origami {}.',
    'the {} in a video game.', 'a sketch of a {}.', 'a doodle of the {}.',
    'a origami {}.', 'a low resolution photo of a {}.', 'the toy {}.',
    'a rendition of the {}.', 'a photo of the clean {}.',
    'a photo of a large {}.', 'a rendition of a {}.', 'a photo of a nice {}.',
    'a photo of a weird {}.', 'a blurry photo of a {}.', 'a cartoon {}.',
    'art of a {}.', 'a sketch of the {}.', 'a embroidered {}.',
    'a pixelated photo of a {}.', 'itap of the {}.',
    'a jpeg corrupted photo of the {}.', 'a good photo of a {}.',
    'itap of a {}.')

# F-ViT's 63 templates (CLIPSelf, F-ViT/tools/clip_utils.py), used with
# ``prompt_style='fvit'``: ``{article}`` is 'a'/'an' and prompts starting
# with "a"/"the" get a leading "This is ".
FVIT_TEMPLATES = (
    'There is {article} {} in the scene.', 'There is the {} in the scene.',
    'a photo of {article} {} in the scene.', 'a photo of the {} in the scene.',
    'a photo of one {} in the scene.', 'itap of {article} {}.',
    'itap of my {}.', 'itap of the {}.', 'a photo of {article} {}.',
    'a photo of my {}.', 'a photo of the {}.', 'a photo of one {}.',
    'a photo of many {}.', 'a good photo of {article} {}.',
    'a good photo of the {}.', 'a bad photo of {article} {}.',
    'a bad photo of the {}.', 'a photo of a nice {}.',
    'a photo of the nice {}.', 'a photo of a cool {}.',
    'a photo of the cool {}.', 'a photo of a weird {}.',
    'a photo of the weird {}.', 'a photo of a small {}.',
    'a photo of the small {}.', 'a photo of a large {}.',
    'a photo of the large {}.', 'a photo of a clean {}.',
    'a photo of the clean {}.', 'a photo of a dirty {}.',
    'a photo of the dirty {}.', 'a bright photo of {article} {}.',
    'a bright photo of the {}.', 'a dark photo of {article} {}.',
    'a dark photo of the {}.', 'a photo of a hard to see {}.',
    'a photo of the hard to see {}.',
    'a low resolution photo of {article} {}.',
    'a low resolution photo of the {}.', 'a cropped photo of {article} {}.',
    'a cropped photo of the {}.', 'a close-up photo of {article} {}.',
    'a close-up photo of the {}.', 'a jpeg corrupted photo of {article} {}.',
    'a jpeg corrupted photo of the {}.', 'a blurry photo of {article} {}.',
    'a blurry photo of the {}.', 'a pixelated photo of {article} {}.',
    'a pixelated photo of the {}.', 'a black and white photo of the {}.',
    'a black and white photo of {article} {}.', 'a plastic {}.',
    'the plastic {}.', 'a toy {}.', 'the toy {}.', 'a plushie {}.',
    'the plushie {}.', 'a cartoon {}.', 'the cartoon {}.',
    'an embroidered {}.', 'the embroidered {}.', 'a painting of the {}.',
    'a painting of a {}.')
# CLIP's full ImageNet prompt set (the 80 of CLIP's zero-shot notebook, the
# set MaskCLIP and the zero-shot segmentation literature use): the first 62
# of ``CLIP_TEMPLATES`` then 18 more.
IMAGENET_TEMPLATES = CLIP_TEMPLATES[:62] + (
    'a plushie {}.', 'a photo of the nice {}.', 'a photo of the small {}.',
    'a photo of the weird {}.', 'the cartoon {}.', 'art of the {}.',
    'a drawing of the {}.', 'a photo of the large {}.',
    'a black and white photo of a {}.', 'the plushie {}.',
    'a dark photo of a {}.', 'itap of a {}.', 'graffiti of the {}.',
    'a toy {}.', 'itap of my {}.', 'a photo of a cool {}.',
    'a photo of a small {}.', 'a tattoo of the {}.')
# The default prompt set: F-ViT's.
PROMPT_TEMPLATES = FVIT_TEMPLATES
SINGLE_TEMPLATE = ('a photo of a {}.', )
TEMPLATE_SETS = dict(
    fvit=FVIT_TEMPLATES,
    clip=CLIP_TEMPLATES,
    imagenet80=IMAGENET_TEMPLATES,
    single=SINGLE_TEMPLATE)
PROMPT_STYLES = ('fvit', 'plain')


def fvit_prompts(name: str, templates: Sequence[str]) -> List[str]:
    """F-ViT's prompts of one class name (CLIPSelf ``clip_utils``).

    The name is lower-cased with ``_`` read as a space, ``/`` as " or " and
    trailing dots removed; ``{article}`` is "an" when the raw name starts
    with a lower-case vowel, else "a"; prompts that start with "a" or
    "the" get a leading "This is ".
    """
    text = name.replace('_', ' ').replace('/', ' or ').lower().rstrip('.')
    article = 'an' if name[:1] in 'aeiou' and name else 'a'
    prompts = [tpl.format(text, article=article) for tpl in templates]
    return [
        'This is ' + p if p.startswith(('a', 'the')) else p for p in prompts
    ]


def plain_prompts(name: str, templates: Sequence[str]) -> List[str]:
    """Each template filled with the name, ``_`` read as a space."""
    return [tpl.format(name.replace('_', ' ')) for tpl in templates]


def check_templates(templates: Sequence[str], prompt_style: str) -> None:
    """Raise unless ``prompt_style`` is known and every template has
    exactly one ``'{}'``."""
    if prompt_style not in PROMPT_STYLES:
        raise ValueError(f'prompt_style must be one of {PROMPT_STYLES}, got '
                         f'{prompt_style!r}')
    for tpl in templates:
        if tpl.count('{}') != 1:
            raise ValueError(f'template needs exactly one {{}}: {tpl!r}')


def class_prompts(name: str, templates: Sequence[str],
                  prompt_style: str) -> List[str]:
    """The prompts of one class name in ``prompt_style``
    (:func:`fvit_prompts` or :func:`plain_prompts`)."""
    make = fvit_prompts if prompt_style == 'fvit' else plain_prompts
    return make(name, templates)
