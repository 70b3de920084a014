"""Zero-shot top-k and retrieval R@K metrics."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from open_clip_train.train import get_clip_metrics

from mmlocat.evaluation import RetrievalRecall, ZeroShotAccuracy
from mmlocat.text import save_text_embeddings


def _unit(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return F.normalize(torch.randn(*shape, generator=g), dim=-1)


def test_retrieval_one_caption_per_image_equals_open_clip():
    images, texts = _unit(20, 8), _unit(20, 8, seed=1)
    texts[:10] = F.normalize(images[:10] + 0.3 * texts[:10], dim=-1)
    metric = RetrievalRecall()
    metric.process(None, [
        dict(
            img_id=i,
            image_embedding=images[i],
            text_embeddings=texts[i:i + 1]) for i in range(20)
    ])
    ours = metric.compute_metrics(metric.results)
    ref = get_clip_metrics(images, texts, torch.tensor(1.))
    for k in (1, 5, 10):
        assert ours[f'i2t_R@{k}'] == pytest.approx(100 *
                                                   ref[f'image_to_text_R@{k}'])
        assert ours[f't2i_R@{k}'] == pytest.approx(100 *
                                                   ref[f'text_to_image_R@{k}'])
    assert 0 < ours['i2t_R@1'] < 100


def test_retrieval_several_captions_and_repeated_images():
    e = torch.eye(3)

    def t(*v):
        return F.normalize(torch.tensor(v), dim=0)

    # image 0: captions a (closest to image 0) and b (closest to image 2);
    # image 1: caption c (closest to image 2, then image 1); image 2: d.
    # Image 1's best caption is a (image 0's), its second c.
    a, b, c, d = t(.9, .2, 0), t(.2, 0, .9), t(0, .1, .9), t(.05, 0, .95)
    samples = [
        dict(
            img_id=0,
            image_embedding=e[0],
            text_embeddings=torch.stack([a, b])),
        dict(img_id=1, image_embedding=e[1], text_embeddings=c[None]),
        dict(img_id=2, image_embedding=e[2], text_embeddings=d[None]),
    ]
    metric = RetrievalRecall(topk=(1, 2))
    # a distributed sampler may pad with a repeated image: counted once
    metric.process(None, samples + samples[:1])
    out = metric.compute_metrics(metric.results)
    assert out == {
        'i2t_R@1': pytest.approx(100 * 2 / 3),
        't2i_R@1': pytest.approx(100 * 2 / 4),
        'i2t_R@2': pytest.approx(100.),
        't2i_R@2': pytest.approx(100.),
    }
    with pytest.raises(KeyError, match='group_by_image=True'):
        metric.process(None, [dict(img_id=0, image_embedding=e[0])])


def test_zero_shot_accuracy(tmp_path):
    names = ['red star', 'blue ring', 'green triangle']
    text = np.eye(3, 4, dtype=np.float32)
    path = save_text_embeddings(str(tmp_path / 'zs.npy'), text, names)
    metric = ZeroShotAccuracy(embeddings=path, topk=(1, 2))
    metric.dataset_meta = dict(classes=names)
    images = torch.tensor([[1., .5, 0, 0], [0, 1., .9, 0], [0, .8, 1., 0],
                           [.1, .2, 0, 1.]])
    labels = [0, 2, 1, 0]
    metric.process(None, [
        dict(image_embedding=i, gt_label=torch.tensor([y]))
        for i, y in zip(images, labels)
    ])
    out = metric.compute_metrics(metric.results)
    # best class per image 0, 1, 2, 1 (labels 0, 2, 1, 0); second 1, 2, 1, 0
    assert out == {'top1': pytest.approx(25.), 'top2': pytest.approx(100.)}
    wrong = ZeroShotAccuracy(embeddings=path, class_names=names[::-1])
    wrong.process(
        None, [dict(image_embedding=images[0], gt_label=torch.tensor([0]))])
    with pytest.raises(ValueError, match='different order'):
        wrong.compute_metrics(wrong.results)
    with pytest.raises(KeyError, match='gt_label'):
        metric.process(None, [dict(image_embedding=images[0])])
    bare = ZeroShotAccuracy(embeddings=path)
    bare.process(None,
                 [dict(image_embedding=images[0], gt_label=torch.tensor([0]))])
    with pytest.raises(ValueError, match='needs class_names'):
        bare.compute_metrics(bare.results)


def test_zero_shot_accuracy_checks_clip_and_prompts_at_build(tmp_path):
    """The embeddings' recorded text model must be the CLIP an image-tower
    checkpoint records (F-ViT's check, ``check_clip=False`` opts out), and
    their prompt recipe the one named."""
    from mmlocat.utils.checkpoint_io import save_checkpoint
    names = ['a', 'b']
    path = save_text_embeddings(
        str(tmp_path / 'zs.npy'),
        np.eye(2, 4, dtype=np.float32),
        names,
        text_model=dict(
            name='ViT-B-16',
            sha256='1' * 64,
            templates='clip',
            prompt_style='plain'))
    # a record bound to the tower's weights, as converters write it since
    # issue 34 (clip_meta); without image_sha256 it is refused as unproven
    from mmlocat.utils.records import clip_meta
    ckpt = str(tmp_path / 'tower.pth')
    weights = {'w': torch.zeros(1)}
    save_checkpoint(
        weights,
        ckpt,
        meta=clip_meta(dict(name='ViT-B-16', sha256='2' * 64), weights))
    with pytest.raises(ValueError, match="CLIP sha256 '1111.*'2222"):
        ZeroShotAccuracy(embeddings=path, clip_checkpoint=ckpt)
    ZeroShotAccuracy(embeddings=path, clip_checkpoint=ckpt, check_clip=False)
    with pytest.raises(
            ValueError,
            match="templates 'clip' but "
            "ZeroShotAccuracy names 'imagenet80'"):
        ZeroShotAccuracy(embeddings=path, templates='imagenet80')
    ZeroShotAccuracy(embeddings=path, templates='clip', prompt_style='plain')
    with pytest.raises(FileNotFoundError, match='none.json'):
        ZeroShotAccuracy(embeddings=str(tmp_path / 'none.npy'))
