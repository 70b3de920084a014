"""ImageNet zero-shot as open_clip's protocol, and the trained LaSt-CLIP
text tower, through tools/misc/dump_text_embeddings.py.

The references are open_clip's own: ``IMAGENET_CLASSNAMES``,
``OPENAI_IMAGENET_TEMPLATES``, ``build_zero_shot_classifier`` and
``open_clip_train.zero_shot.accuracy``, on a tiny random-init open_clip
CLIP saved as a user's weights file (registered as an open_clip model
config, as ``--model-config`` does).
"""
import json
import math
import sys

import numpy as np
import open_clip
import pytest
import torch
from helpers.tiny_archs import tiny_open_clip_cfg

from mmlocat.text import (TEMPLATE_SETS, load_text_embeddings, plain_prompts,
                          write_text_embeddings)
from mmlocat.text.class_names import imagenet_class_names
from mmlocat.utils.records import file_sha256, text_sha256

MODEL_CFG = tiny_open_clip_cfg(
    embed_dim=8, text_width=16, text_layers=1, width=8, head_width=8)
# classes of ImageNet whose open_clip name is listed twice, and neighbours
SUBSET = [0, 1, 657, 744, 836, 837, 999]

TOOL = 'tools/misc/dump_text_embeddings.py'


@pytest.fixture(scope='module')
def tiny(tmp_path_factory):
    """(model config JSON, weights file, the open_clip model)."""
    tmp = tmp_path_factory.mktemp('tiny_clip')
    config = tmp / 'tiny-zs-clip.json'
    config.write_text(json.dumps(MODEL_CFG))
    open_clip.add_model_config(str(config))
    torch.manual_seed(0)
    model = open_clip.CLIP(**MODEL_CFG).eval()
    weights = str(tmp / 'tiny.pt')
    torch.save(model.state_dict(), weights)
    return str(config), weights, model


def _reference(model, names):
    """open_clip's zero-shot classifier, ``(C, D)``."""
    tokenizer = open_clip.get_tokenizer('ViT-B-16')
    return open_clip.build_zero_shot_classifier(
        model,
        tokenizer=tokenizer,
        classnames=names,
        templates=open_clip.OPENAI_IMAGENET_TEMPLATES,
        num_classes_per_batch=10).T.numpy()


def test_names_and_prompts_are_open_clips():
    names = imagenet_class_names()
    assert names == list(open_clip.IMAGENET_CLASSNAMES)
    from mmpretrain.datasets.categories import IMAGENET_CATEGORIES
    assert imagenet_class_names('wordnet') == list(IMAGENET_CATEGORIES)
    templates = TEMPLATE_SETS['imagenet80']
    for name in names:
        assert plain_prompts(name, templates) == [
            t(name) for t in open_clip.OPENAI_IMAGENET_TEMPLATES
        ], name
    with pytest.raises(ValueError, match="one of \\('open_clip', 'wordnet'"):
        imagenet_class_names('imagenet21k')


def test_listed_embeddings_are_open_clips_classifier(tiny, tmp_path):
    _, _, model = tiny
    names = [imagenet_class_names()[i] for i in SUBSET]
    tokenizer = open_clip.get_tokenizer('ViT-B-16')

    def encode(prompts):
        with torch.no_grad():
            return model.encode_text(tokenizer(prompts))

    emb, rows = write_text_embeddings(
        str(tmp_path / 'listed.npy'),
        names,
        encode, {},
        templates='imagenet80',
        prompt_style='plain',
        repeated_names=True)
    assert rows == names and names[2] == names[3] == 'missile'
    np.testing.assert_allclose(
        emb, _reference(model, names), atol=2e-6, rtol=0)


def test_imagenet_defaults_to_open_clips_protocol(load_tool):
    tool = load_tool(TOOL, 'dump_imagenet')
    args = tool.parse_args(['--imagenet', '--pretrained', 'w.pt', 'x.npy'])
    assert args.imagenet == 'open_clip'
    tool.resolve_prompt_defaults(args)
    assert (args.templates, args.prompt_style) == ('imagenet80', 'plain')
    args = tool.parse_args(['--names', 'n.txt', '--pretrained', 'w', 'x.npy'])
    tool.resolve_prompt_defaults(args)
    assert (args.templates, args.prompt_style) == ('fvit', 'fvit')
    args = tool.parse_args([
        '--imagenet', 'wordnet', '--templates', 'clip', '--pretrained', 'w',
        'x.npy'
    ])
    tool.resolve_prompt_defaults(args)
    assert (args.imagenet, args.templates,
            args.prompt_style) == ('wordnet', 'clip', 'plain')


def test_tool_writes_the_imagenet_file(tiny, tmp_path, load_tool, monkeypatch):
    """``--imagenet``: open_clip's 1,000 names, one row each (a name listed
    twice gets the same row); one template keeps it fast (the 80 of the
    default are checked above, per class)."""
    config, weights, model = tiny
    out = str(tmp_path / 'imagenet.npy')
    monkeypatch.setattr(sys, 'argv', [
        'dump', '--imagenet', '--templates', 'single', '--model-config',
        config, '--pretrained', weights, out
    ])
    load_tool(TOOL, 'dump_imagenet').main()
    emb, bg, rows = load_text_embeddings(out, imagenet_class_names())
    assert bg is None and emb.shape == (1000, 8)
    np.testing.assert_array_equal(emb[657], emb[744])  # 'missile' twice
    tokenizer = open_clip.get_tokenizer('ViT-B-16')
    with torch.no_grad():
        ref = model.encode_text(
            tokenizer([f'a photo of a {rows[i]}.' for i in SUBSET]),
            normalize=True)
    np.testing.assert_allclose(emb[SUBSET], ref.numpy(), atol=2e-6, rtol=0)
    with open(out[:-4] + '.json') as f:
        side = json.load(f)
    # the sidecar is bound to its rows (issue 34)
    from mmlocat.utils.records import rows_sha256
    from mmlocat.utils.safe_load import load_array
    assert side['text_model'].pop('rows_sha256') == rows_sha256(
        load_array(out))
    # and its templates to their content (issue 34)
    from mmlocat.text import TEMPLATE_SETS
    from mmlocat.utils.records import templates_sha256
    assert side['text_model'].pop('templates_sha256') == templates_sha256(
        TEMPLATE_SETS['single'])
    assert side['text_model'] == dict(
        name='tiny-zs-clip',
        weights='tiny.pt',
        sha256=file_sha256(weights),
        # the text tower's fingerprint and activation (the tiny config's
        # exact GELU), compared by the provenance checks
        text_sha256=text_sha256(model.state_dict()),
        text_act='gelu',
        templates='single',
        prompt_style='plain')
    # the ImageNet evaluator's default class names accept exactly this file
    from mmlocat.evaluation import ZeroShotAccuracy
    metric = ZeroShotAccuracy(embeddings=out, class_names='imagenet_open_clip')
    assert metric._class_embeddings().shape == (1000, 8)
    wordnet = ZeroShotAccuracy(embeddings=out, class_names='imagenet_wordnet')
    with pytest.raises(ValueError, match='do not match the dataset classes'):
        wordnet._class_embeddings()


def _open_clip_accuracy(output, target, topk):
    """open_clip_train.zero_shot.accuracy, transcribed (the installed one
    ends in float() of a 1-element numpy array, which numpy 2 refuses)."""
    pred = output.topk(max(topk), 1, True, True)[1].t()
    correct = pred.eq(target.view(1, -1).expand_as(pred))
    return [float(correct[:k].reshape(-1).float().sum(0)) for k in topk]


def test_zero_shot_accuracy_is_open_clips_with_ties(tmp_path):
    """Classes with the same embedding (a name listed twice) rank as in
    open_clip's accuracy (torch's topk)."""
    from mmlocat.evaluation import ZeroShotAccuracy
    from mmlocat.text import save_text_embeddings
    gen = torch.Generator().manual_seed(0)
    classes = 12
    text = torch.nn.functional.normalize(
        torch.randn(classes, 6, generator=gen), dim=-1)
    text[5] = text[3]  # the same name twice
    names = [f'c{i}' for i in range(classes)]
    path = save_text_embeddings(str(tmp_path / 'zs.npy'), text.numpy(), names)
    images = torch.nn.functional.normalize(
        torch.randn(40, 6, generator=gen), dim=-1)
    images[:10] = text[3] + 0.01 * images[:10]  # near the tied classes
    labels = torch.randint(0, classes, (40, ), generator=gen)
    labels[:10] = torch.tensor([3, 5] * 5)
    metric = ZeroShotAccuracy(embeddings=path, class_names=names, topk=(1, 5))
    metric.process(None, [
        dict(image_embedding=i, gt_label=torch.tensor([y]))
        for i, y in zip(images, labels)
    ])
    out = metric.compute_metrics(metric.results)
    top1, top5 = _open_clip_accuracy(
        100. * images @ torch.from_numpy(load_text_embeddings(path)[0]).T,
        labels,
        topk=(1, 5))
    assert out == {
        'top1': pytest.approx(100 * top1 / 40),
        'top5': pytest.approx(100 * top5 / 40)
    }
    assert 0 < out['top1'] < 100


def _exported_text_tower(tmp_path, model, model_name):
    """What lastclip2mmlocat.py --text-out writes for a run that trained
    its text tower (open_clip text keys, the trained logit scale)."""
    from mmlocat.utils.checkpoint_io import save_checkpoint
    from mmlocat.utils.records import TEXT_TOWER_KEY
    torch.manual_seed(3)
    tuned = open_clip.CLIP(**MODEL_CFG).eval()
    with torch.no_grad():
        tuned.logit_scale.fill_(math.log(70.))
    state = {
        k: v
        for k, v in tuned.state_dict().items() if not k.startswith('visual.')
    }
    path = str(tmp_path / 'last-text.pth')
    save_checkpoint(
        state,
        path,
        meta={
            TEXT_TOWER_KEY: dict(model_name=model_name, source='lastclip:ab')
        })
    return path, tuned


def test_trained_text_tower_file(tiny, tmp_path, load_tool, monkeypatch):
    """The tuned text tower file (no image keys) is read into open_clip's
    text tower: the tool's embeddings are its encode_text's, and the
    sidecar names the file (what the exported backbone records)."""
    config, _, _ = tiny
    path, tuned = _exported_text_tower(tmp_path, None, 'tiny-zs-clip')
    names = tmp_path / 'names.txt'
    names.write_text('red star\nblue ring\n')
    out = str(tmp_path / 'tuned.npy')
    monkeypatch.setattr(sys, 'argv', [
        'dump', '--names',
        str(names), '--model-config', config, '--pretrained', path,
        '--templates', 'single', '--prompt-style', 'plain', out
    ])
    load_tool(TOOL, 'dump_imagenet').main()
    emb, _, rows = load_text_embeddings(out)
    tokenizer = open_clip.get_tokenizer('ViT-B-16')
    with torch.no_grad():
        ref = tuned.encode_text(
            tokenizer(['a photo of a red star.', 'a photo of a blue ring.']),
            normalize=True)
    np.testing.assert_allclose(emb, ref.numpy(), atol=1e-6, rtol=0)
    with open(out[:-4] + '.json') as f:
        side = json.load(f)['text_model']
    assert (side['name'], side['weights'],
            side['sha256']) == ('tiny-zs-clip', 'last-text.pth',
                                file_sha256(path))
    # a tower trained as another open_clip model is refused
    from mmlocat.text import open_clip_encoder
    with pytest.raises(
            ValueError, match="model 'tiny-zs-clip', not "
            "'ViT-B-16'"):
        open_clip_encoder('ViT-B-16', path)
