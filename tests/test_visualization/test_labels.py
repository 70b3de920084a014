"""Score text of mmlocat's pictures (issue 36: no '0.00')."""


def test_small_scores_keep_three_significant_digits():
    from mmlocat.apis.inferencer import score_labels
    from mmlocat.visualization.labels import format_score
    assert format_score(0.934) == '0.934'
    assert format_score(0.004) == '0.004'  # the host prints 0.00
    assert format_score(0.000123456) == '0.000123'
    assert format_score(1.23456e-7) == '1.23e-07'
    assert format_score(1.0) == '1'
    assert score_labels([0.5, 2e-5], ['cat', 'dog']) == [
        'cat, 0.5', 'dog, 2e-05'
    ]
    assert score_labels([0.5, 2e-5], None) == ['0.5', '2e-05']
