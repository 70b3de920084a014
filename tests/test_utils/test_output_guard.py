"""refuse_output_over_input: an output that resolves to an input, by any
path (the same name, a symlink, a hard link, a symlinked folder), is
refused naming both; distinct files pass (issue 33)."""
import os

import pytest

from mmlocat.utils.output_guard import refuse_output_over_input, same_file


@pytest.fixture
def src(tmp_path):
    path = tmp_path / 'model.pth'
    path.write_bytes(b'weights')
    return str(path)


def test_same_path_and_relative_path(src, tmp_path, monkeypatch):
    with pytest.raises(ValueError) as info:
        refuse_output_over_input(dict(DST=src), dict(SRC=src))
    assert str(info.value) == (
        f'DST {src} is the input SRC {src}: writing it would destroy the '
        'input; choose another DST path')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match='is the input SRC'):
        refuse_output_over_input(dict(DST='./model.pth'), dict(SRC=src))


def test_symlink_hard_link_and_symlinked_folder(src, tmp_path):
    link = str(tmp_path / 'link.pth')
    os.symlink(src, link)
    with pytest.raises(ValueError) as info:
        refuse_output_over_input({'--out': link}, dict(CHECKPOINT=src))
    assert str(info.value).startswith(
        f'--out {link} (-> {src}) is the input CHECKPOINT {src}: ')

    hard = str(tmp_path / 'hard.pth')
    os.link(src, hard)
    with pytest.raises(ValueError, match='is the input'):
        refuse_output_over_input(dict(DST=hard), dict(SRC=src))

    folder = tmp_path / 'alias'
    os.symlink(tmp_path, folder)
    with pytest.raises(ValueError, match='is the input'):
        refuse_output_over_input(
            dict(DST=str(folder / 'model.pth')), dict(SRC=src))


def test_dangling_link_to_a_missing_input_is_the_same_file(tmp_path):
    missing = str(tmp_path / 'not_yet.pth')
    link = str(tmp_path / 'link.pth')
    os.symlink(missing, link)
    assert same_file(link, missing)
    assert not same_file(str(tmp_path / 'a'), str(tmp_path / 'b'))


def test_distinct_files_urls_and_unset_options_pass(src, tmp_path):
    out = str(tmp_path / 'out.pth')
    refuse_output_over_input({
        'DST': out,
        '--text-out': None
    }, {
        'SRC': src,
        '--model-config': None,
        '--pretrained': 'https://x/model.pth'
    })
    with open(src, 'rb') as f:
        assert f.read() == b'weights'


def test_two_outputs_that_are_one_file(src, tmp_path):
    out = str(tmp_path / 'out.pth')
    with pytest.raises(ValueError) as info:
        refuse_output_over_input({'DST': out, '--text-out': out}, {})
    assert str(info.value) == (
        f'DST {out} and --text-out {out} are one file: one output would '
        'replace the other; choose another --text-out path')
