"""tools/misc/dump_text_embeddings.py as a newcomer runs it: a progress bar,
a short output (no per-tensor init report), and a second identical dump
(a LaSt config's CLS twin, another copy of the same weights) served by the
cache without building the text tower."""
import json
import os

import numpy as np
import open_clip
import pytest
import torch
from helpers.harness import run_tool
from helpers.tiny_archs import tiny_open_clip_cfg

from mmlocat.text import load_text_embeddings

TOOL = 'tools/misc/dump_text_embeddings.py'
NAMES = ['cat', 'dog', 'traffic light', 'person']


@pytest.mark.e2e
def test_dump_shows_progress_is_short_and_cached(tmp_path):
    config = str(tmp_path / 'tiny-dump-clip.json')
    with open(config, 'w') as f:
        json.dump(tiny_open_clip_cfg(embed_dim=8, text_width=16), f)
    open_clip.add_model_config(config)
    torch.manual_seed(0)
    model = open_clip.CLIP(**tiny_open_clip_cfg(embed_dim=8, text_width=16))
    weights = str(tmp_path / 'tiny.pt')
    torch.save(model.state_dict(), weights)
    names = tmp_path / 'names.txt'
    names.write_text('\n'.join(NAMES) + '\n')
    env = dict(MMLOCAT_CACHE=str(tmp_path / 'cache'))

    def dump(weights, out):
        proc = run_tool(
            TOOL,
            '--names',
            names,
            '--model-config',
            config,
            '--pretrained',
            weights,
            out,
            env=env)
        assert proc.returncode == 0, proc.stderr
        return proc.output

    first = dump(weights, str(tmp_path / 'a.npy'))
    # a bar with a count and a rate/ETA, not hundreds of init lines
    assert 'text embeddings: 100%' in first, first
    assert f'{len(NAMES)}/{len(NAMES)}' in first and '<' in first, first
    assert 'before and after calling' not in first, first
    assert 'OpenCLIPTextTower.init_weights:' in first, first
    lines = first.replace('\r', '\n').splitlines()
    assert len(first.splitlines()) < 20, first
    assert len(lines) >= 3, first  # the bar redraws on \r

    # the twin: the same bytes under another name
    twin = str(tmp_path / 'twin.pt')
    with open(weights, 'rb') as src, open(twin, 'wb') as dst:
        dst.write(src.read())
    second = dump(twin, str(tmp_path / 'b.npy'))
    assert 'the text tower was not built' in second, second
    assert 'OpenCLIPTextTower.init_weights' not in second, second
    assert 'text embeddings: ' not in second.replace('text embeddings: reused',
                                                     ''), second
    a, _, rows_a = load_text_embeddings(str(tmp_path / 'a.npy'))
    b, _, rows_b = load_text_embeddings(str(tmp_path / 'b.npy'))
    np.testing.assert_array_equal(a, b)
    assert rows_a == rows_b == NAMES
    side = json.load(open(tmp_path / 'b.json'))
    assert side['text_model']['weights'] == 'twin.pt'
    assert len(os.listdir(tmp_path / 'cache' / 'vocabulary')) == 2
