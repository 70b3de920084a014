"""The generated captioned shapes: layout, captions, and learnable."""
import math
import os.path as osp
import tarfile

import numpy as np
import pytest
import torch
from mmpretrain.structures import DataSample
from PIL import Image

import mmlocat  # noqa: F401
from mmlocat.datasets import CocoCaptionDataset, TokenizeCaption
from mmlocat.models import CLIPContrastive
from mmlocat.testing import generate
from mmlocat.testing.caption_writer import caption_class_names

CFG = dict(
    embed_dim=16,
    vision_cfg=dict(
        image_size=32, layers=1, width=32, patch_size=16, head_width=16),
    text_cfg=dict(
        context_length=12, vocab_size=49408, width=32, heads=2, layers=1))


def test_layout_and_captions(tmp_path):
    paths = generate('captions', str(tmp_path), 16, 2, (32, 32), seed=0)
    root = paths['data_root']
    names = caption_class_names()
    assert len(names) == 16 and names[0] == 'red star'
    with open(osp.join(paths['zeroshot_root'],
                       paths['zeroshot_classes'])) as f:
        assert f.read().splitlines() == names
    with open(osp.join(paths['zeroshot_root'],
                       paths['zeroshot_ann_file'])) as f:
        lines = f.read().splitlines()
    assert len(lines) == 32 and lines[0] == 'red_star/0000.JPEG 0'
    data = CocoCaptionDataset(
        data_root=root,
        ann_file=paths['train_ann_file'],
        data_prefix=dict(img_path=paths['train_prefix']),
        group_by_image=True)
    looks = set()
    for item in data:
        first, second = item['captions']
        colour, shape = first.split(' ')[1:3]
        background = first.split(' on a ')[1]
        assert second == f'a {background} with a {colour} {shape}'
        looks.add((colour, shape))
        image = np.asarray(Image.open(item['img_path']))
        assert image.shape == (32, 32, 3)
    assert len(looks) == 16  # every colour x shape in 16 images


def test_shards_split_the_images_and_are_reproducible(tmp_path):
    runs = [
        generate('captions', str(tmp_path / name), 5, 2, (16, 16), shards=2)
        for name in ('a', 'b')
    ]
    assert runs[0]['train_shards'] == 'shards/train-{000000..000001}.tar'
    for name in ('train-000000', 'train-000001', 'val-000000', 'val-000001'):
        a, b = (
            osp.join(r['data_root'], 'shards', f'{name}.tar') for r in runs)
        with open(a, 'rb') as fa, open(b, 'rb') as fb:
            assert fa.read() == fb.read(), name
        with tarfile.open(a) as tar:
            members = tar.getnames()
        # 5 train images over 2 shards: 3 + 2; val: 1 + 1
        count = dict(zip(['train-000000', 'train-000001'], [3, 2]))
        assert len(members) == 2 * count.get(name, 1), members
    with pytest.raises(ValueError, match=r'shards must be in \[0, 2\]'):
        generate('captions', str(tmp_path / 'c'), 5, 2, (16, 16), shards=3)


def test_a_tiny_clip_learns_it(tmp_path):
    """60 AdamW steps of a 2-block CLIPViT + 1-block open_clip text tower:
    the contrastive loss must drop to under half its start."""
    torch.manual_seed(0)
    paths = generate('captions', str(tmp_path), 32, 2, (32, 32), seed=0)
    data = CocoCaptionDataset(
        data_root=paths['data_root'],
        ann_file=paths['train_ann_file'],
        data_prefix=dict(img_path=paths['train_prefix']))
    model = CLIPContrastive(
        image_encoder=dict(
            type='mmlocat.CLIPViT',
            arch=dict(
                embed_dims=32,
                num_layers=2,
                num_heads=2,
                feedforward_channels=64,
                output_dims=16),
            img_size=32,
            patch_size=8,
            act='gelu',
            topk_ratio=0.5),
        text_encoder=dict(model_cfg=CFG),
        # from scratch: no text weights to read the pretrained scale from
        init_logit_scale=math.log(1 / 0.07))
    model.init_weights()
    tokenize = TokenizeCaption(model_cfg=CFG)
    images = torch.stack([
        torch.from_numpy(np.asarray(Image.open(d['img_path']))).permute(
            2, 0, 1).float() for d in data
    ])
    images = (images - 127.5) / 64
    tokens = torch.stack(
        [tokenize(dict(caption=d['caption']))['text_tokens'] for d in data])
    optim = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.)
    gen = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(60):
        idx = torch.randperm(len(data), generator=gen)[:16]
        loss = model.loss(images[idx],
                          [DataSample(text_tokens=tokens[i])
                           for i in idx])['loss']
        optim.zero_grad()
        loss.backward()
        optim.step()
        losses.append(float(loss))
    start, end = np.mean(losses[:3]), np.mean(losses[-5:])
    assert end < 0.5 * start, (start, end)
