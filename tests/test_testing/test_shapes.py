import numpy as np
import pytest

from mmlocat.testing.shapes import (SHAPES, TEXTURES, class_style, draw_scene,
                                    tight_box)


def _scene(seed=0, **kwargs):
    args = dict(object_classes=[0, 1, 2, 3, 9], num_objects=(2, 4))
    args.update(kwargs)
    return draw_scene(np.random.default_rng(seed), (64, 48), **args)


def test_class_styles_differ():
    looks = {(class_style(i).shape, class_style(i).texture) for i in range(32)}
    assert len(looks) == 32
    assert {class_style(i).shape for i in range(8)} == set(SHAPES)
    assert {class_style(8 * i).texture for i in range(4)} == set(TEXTURES)
    # Same shape and texture 32 ids apart, but another colour.
    assert class_style(3).color != class_style(35).color
    with pytest.raises(ValueError, match='class_id'):
        class_style(-1)


def test_scene_annotations_agree():
    for seed in range(5):
        s = _scene(seed, stuff_classes=[20, 21], ignore_prob=1.0)
        n = len(s.labels)
        assert n >= 2
        assert s.image.shape == (64, 48, 3) and s.image.dtype == np.uint8
        assert s.masks.shape == (n, 64, 48) and s.boxes.shape == (n, 4)
        # Visible masks are disjoint, non-empty, labelled in the semantic
        # map and tightly boxed.
        assert s.masks.sum(0).max() == 1
        for mask, label, box in zip(s.masks, s.labels, s.boxes):
            assert mask.sum() >= 12
            assert (s.semantic[mask] == label).all()
            np.testing.assert_array_equal(box, tight_box(mask))
        rest = ~s.masks.any(0)
        assert set(np.unique(s.semantic[rest])) <= {-1, 20, 21}
        assert (s.semantic == -1).any()  # ignore_prob=1 leaves a region


def test_plain_background_has_no_class():
    s = _scene(1)
    assert (s.semantic[~s.masks.any(0)] == -1).all()


def test_same_class_instances_do_not_touch():
    for seed in range(10):
        s = _scene(seed, object_classes=[4], num_objects=(3, 3))
        for i in range(len(s.labels)):
            for j in range(i + 1, len(s.labels)):
                a, b = s.masks[i], s.masks[j]
                grown = a.copy()
                grown[1:] |= a[:-1]
                grown[:-1] |= a[1:]
                grown[:, 1:] |= grown[:, :-1].copy()
                grown[:, :-1] |= grown[:, 1:].copy()
                assert not (grown & b).any()


def test_deterministic_and_seed_dependent():
    a, b, c = _scene(7), _scene(7), _scene(8)
    np.testing.assert_array_equal(a.image, b.image)
    np.testing.assert_array_equal(a.masks, b.masks)
    assert not np.array_equal(a.image, c.image)


def test_colours_identify_classes():
    """A nearest-mean colour classifier separates the classes, so a tiny
    model has something to learn."""
    classes = list(range(8))
    feats = {c: [] for c in classes}
    for seed in range(20):
        s = _scene(seed, object_classes=classes)
        for mask, label in zip(s.masks, s.labels):
            feats[int(label)].append(s.image[mask].mean(0))
    assert all(feats.values())
    means = {c: np.mean(v, 0) for c, v in feats.items()}
    correct = total = 0
    for seed in range(100, 104):
        s = _scene(seed, object_classes=classes)
        for mask, label in zip(s.masks, s.labels):
            f = s.image[mask].mean(0)
            pred = min(means, key=lambda c: np.linalg.norm(means[c] - f))
            correct += int(pred == label)
            total += 1
    assert total >= 8 and correct / total >= 0.9


def test_bad_input():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match='16x16'):
        draw_scene(rng, (8, 64), [0])
    with pytest.raises(ValueError, match='empty'):
        draw_scene(rng, (32, 32), [])
    with pytest.raises(ValueError, match='num_objects'):
        draw_scene(rng, (32, 32), [0], num_objects=(3, 1))
    with pytest.raises(ValueError, match='empty mask'):
        tight_box(np.zeros((4, 4), dtype=bool))
