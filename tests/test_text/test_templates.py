"""mmlocat.text.templates: F-ViT's, CLIP's and open_clip's prompt sets and
prompt styles."""
from mmlocat import text as te

PROMPT_TEMPLATES = te.PROMPT_TEMPLATES
CLIP_TEMPLATES = te.CLIP_TEMPLATES


def test_templates():
    """F-ViT's 63 templates (CLIPSelf F-ViT/tools/clip_utils.py) are the
    default; CLIP's ImageNet-style set stays as an option."""
    assert PROMPT_TEMPLATES is te.FVIT_TEMPLATES
    assert len(PROMPT_TEMPLATES) == 63 == len(set(PROMPT_TEMPLATES))
    assert all(t.count('{}') == 1 for t in PROMPT_TEMPLATES)
    assert PROMPT_TEMPLATES[:2] == ('There is {article} {} in the scene.',
                                    'There is the {} in the scene.')
    assert PROMPT_TEMPLATES[-1] == 'a painting of a {}.'
    for named in ('itap of {article} {}.', 'a bad photo of the {}.',
                  'an embroidered {}.', 'a plushie {}.'):
        assert named in PROMPT_TEMPLATES
    assert sum('{article}' in t for t in PROMPT_TEMPLATES) == 15
    assert len(CLIP_TEMPLATES) == 63 == len(set(CLIP_TEMPLATES))
    assert 'a photo of a {}.' in CLIP_TEMPLATES
    assert te.TEMPLATE_SETS['single'] == ('a photo of a {}.', )


def test_fvit_prompt_rules():
    prompts = te.fvit_prompts('aerosol_can', PROMPT_TEMPLATES)
    assert prompts[0] == 'There is an aerosol can in the scene.'
    assert prompts[5] == 'itap of an aerosol can.'
    assert prompts[8] == 'This is a photo of an aerosol can.'
    assert prompts[10] == 'This is a photo of the aerosol can.'
    assert prompts[-1] == 'This is a painting of a aerosol can.'
    assert 'This is an embroidered aerosol can.' in prompts
    # lower case, '/' read as "or", trailing dots dropped; the article looks
    # at the raw name (a capital vowel gets "a", as in F-ViT).
    assert te.fvit_prompts('Salad/Plate.', ['itap of {article} {}.']) == [
        'itap of a salad or plate.'
    ]
    assert te.fvit_prompts('Apple', ['a photo of {article} {}.']) == [
        'This is a photo of a apple.'
    ]
    assert te.fvit_prompts('egg', ['the {}.', 'There is {article} {}.']) == [
        'This is the egg.', 'There is an egg.'
    ]


def test_imagenet80_templates_are_open_clips():
    """The 80-prompt set is CLIP's ImageNet list as open_clip ships it."""
    from open_clip.zero_shot_metadata import OPENAI_IMAGENET_TEMPLATES

    from mmlocat.text import IMAGENET_TEMPLATES, TEMPLATE_SETS
    assert TEMPLATE_SETS['imagenet80'] is IMAGENET_TEMPLATES
    assert list(IMAGENET_TEMPLATES) == [
        t('{}') for t in OPENAI_IMAGENET_TEMPLATES
    ]
