"""Score text of mmlocat's pictures (issue 36: no '0.00')."""


def test_small_scores_keep_three_significant_digits():
    from mmlocat.apis.inferencer import score_labels
    from mmlocat.visualization.labels import format_score
    assert format_score(0.934) == '0.934'
    assert format_score(0.004) == '0.004'  # the host prints 0.00
    assert format_score(0.000123456) == '0.000123'
    assert format_score(1.23456e-7) == '1.23e-07'
    assert format_score(1.0) == '1'
    assert score_labels([0.5, 2e-5],
                        ['cat', 'dog']) == ['cat, 0.5', 'dog, 2e-05']
    assert score_labels([0.5, 2e-5], None) == ['0.5', '2e-05']


def test_class_legend_of_two_label_maps():
    """The demo's colour key: the classes of the ground truth and the
    prediction together, largest total area first, ignore (255) left
    out, one swatch each in its palette colour."""
    import numpy as np

    from mmlocat.visualization import class_palette
    from mmlocat.visualization.labels import class_legend
    gt = np.full((40, 40), 255, np.int64)
    gt[:, :15] = 2
    pred = np.zeros((40, 40), np.int64)
    pred[:, :30] = 1
    palette = class_palette(4)
    strip = class_legend([gt, pred], ['a', 'b', 'c', 'd'], palette, 200)
    assert strip.shape[0] == 200

    def first_row(label):
        hit = (strip == np.array(palette[label], np.uint8)).all(-1)
        return int(np.argmax(hit.any(1))) if hit.any() else None

    # b (1200 pixels) above c (600) above a (400), no d
    assert first_row(1) < first_row(2) < first_row(0)
    assert first_row(3) is None
