"""No tool writes over its own input.

The one guard every writing tool calls first, before it reads anything: an
output path that is an input (the same path, a symlink to it, a hard link,
or a path through a symlinked folder) would replace the user's file, e.g. a
converter's ``DST`` equal to its ``SRC`` replaces the downloaded checkpoint,
``pytorch2onnx.py --out CKPT`` the trained one.
"""
import os.path as osp
from typing import Mapping, Optional

__all__ = ['refuse_output_over_input', 'same_file']


def same_file(a: str, b: str) -> bool:
    """Whether two paths name one file.

    Both exist: the same inode (``os.path.samefile``; symlinks followed,
    hard links count). Otherwise the paths after resolving symlinks
    (``os.path.realpath``), so an output that does not exist yet but is a
    dangling link to an input, or names it through a symlinked folder,
    still counts.
    """
    if osp.exists(a) and osp.exists(b):
        try:
            return osp.samefile(a, b)
        except OSError:  # e.g. a permission error on stat
            pass
    return osp.realpath(a) == osp.realpath(b)


def _describe(role: str, path: str) -> str:
    real = osp.realpath(path)
    shown = f'{role} {path}'
    if osp.islink(path) or real != osp.abspath(path):
        shown += f' (-> {real})'
    return shown


def refuse_output_over_input(outputs: Mapping[str, Optional[str]],
                             inputs: Mapping[str, Optional[str]]) -> None:
    """Refuse outputs that resolve to an input, or to each other.

    Call it before reading anything, so a refused run changes nothing.

    Args:
        outputs: ``{role: path}`` of the files the tool writes (``None``
            paths, i.e. options not given, are skipped), e.g.
            ``{'DST': args.dst}``.
        inputs: ``{role: path}`` of the files it reads, e.g.
            ``{'SRC': args.src}``; paths with ``://`` (URLs, open_clip
            tags) are skipped.

    Raises:
        ValueError: Naming both paths (and where a link leads) when an
            output is an input or two outputs are one file.
    """
    outs = [(r, p) for r, p in outputs.items() if p]
    ins = [(r, p) for r, p in inputs.items() if p and '://' not in p]
    for out_role, out in outs:
        for in_role, src in ins:
            if same_file(out, src):
                raise ValueError(
                    f'{_describe(out_role, out)} is the input '
                    f'{_describe(in_role, src)}: writing it would destroy '
                    f'the input; choose another {out_role} path')
    for i, (role_a, a) in enumerate(outs):
        for role_b, b in outs[i + 1:]:
            if same_file(a, b):
                raise ValueError(
                    f'{_describe(role_a, a)} and {_describe(role_b, b)} are '
                    'one file: one output would replace the other; choose '
                    f'another {role_b} path')
