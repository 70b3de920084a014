"""add_model_options: the options the model-running tools share."""
import argparse

import pytest

from mmlocat.apis.cli import add_model_options


def _parser(**kwargs) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog='tool')
    add_model_options(parser, **kwargs)
    return parser


def test_defaults_and_cfg_options_parsed():
    args = _parser(alpha=0.6).parse_args(
        ['--cfg-options', 'model.a=1', 'b.c=x'])
    assert args.device == 'cpu'
    assert args.alpha == 0.6
    assert args.cfg_options == {'model.a': 1, 'b.c': 'x'}
    args = _parser(alpha=0.5).parse_args(
        ['--device', 'cuda:0', '--alpha', '0.25'])
    assert (args.device, args.alpha, args.cfg_options) == ('cuda:0', 0.25,
                                                           None)


def test_options_left_out_are_refused(capsys):
    parser = _parser(device=False)
    assert vars(parser.parse_args([])) == {'cfg_options': None}
    for option in ('--device', '--alpha'):
        with pytest.raises(SystemExit):
            parser.parse_args([option, '1'])
        assert f'unrecognized arguments: {option}' in capsys.readouterr().err


def test_alpha_help_text():
    text = _parser(alpha=0.5, alpha_help='mask opacity').format_help()
    assert 'mask opacity' in text
