"""Caption tokenisation in the data pipeline, with open_clip's tokenizer.

Captions longer than the context (77 tokens for every CLIP of the shipped
configs) are truncated exactly as open_clip truncates them (its tokenizer's
output is used as it is: the BPE tokenizer keeps the first 76 tokens and
ends with the end-of-text token, HF tokenizers truncate to the context),
and never silently: :class:`TokenizeCaption` counts them and logs the count
at the 1st, 10th, 100th, ... truncated caption of each data worker
(:class:`mmlocat.utils.counted_log.CountedWarning`);
``tools/misc/check_dataset.py`` counts them for a whole dataset.
"""
from typing import Dict, List, Optional, Sequence

import torch
from mmcv.transforms import BaseTransform

from mmlocat.registry import TRANSFORMS
from mmlocat.utils.counted_log import CountedWarning
from mmlocat.utils.hosts import require_open_clip

__all__ = ['TokenizeCaption', 'build_open_clip_tokenizer', 'over_length']


def over_length(tokenizer, texts: Sequence[str]) -> List[bool]:
    """Which texts ``tokenizer`` (open_clip's) truncates to its context.

    The tokenizer itself decides: tokenised with a context one token longer,
    a truncated text fills that last position (it is not padding).
    Tokenizers with a ``reduction_fn`` (open_clip's random / shuffle /
    syntax reductions) shorten texts on purpose: nothing counts as
    truncated for them.
    """
    if not texts or getattr(tokenizer, 'reduction_fn', None) is not None:
        return [False] * len(texts)
    length = tokenizer.context_length
    longer = torch.as_tensor(tokenizer(list(texts), context_length=length + 1))
    inner = getattr(tokenizer, 'tokenizer', None)  # HFTokenizer's own
    pad = getattr(inner, 'pad_token_id', None) or 0
    return (longer[:, length] != pad).tolist()


def build_open_clip_tokenizer(model_name: Optional[str] = None,
                              model_cfg: Optional[Dict] = None,
                              context_length: Optional[int] = None):
    """open_clip's tokenizer of a model name or a model-config dict.

    A name goes through ``open_clip.get_tokenizer``; a config dict gets
    ``HFTokenizer`` when its ``text_cfg`` names ``hf_tokenizer_name``, else
    CLIP's BPE ``SimpleTokenizer``, with the config's ``context_length``
    (77 if not given) unless ``context_length`` overrides it.
    """
    if (model_name is None) == (model_cfg is None):
        raise ValueError('give exactly one of model_name or model_cfg')
    open_clip = require_open_clip('caption tokenisation')
    if model_name is not None:
        if open_clip.get_model_config(model_name) is None:
            raise ValueError(f'open_clip does not know the model '
                             f'{model_name!r}')
        return open_clip.get_tokenizer(
            model_name, context_length=context_length)
    text_cfg = dict(model_cfg.get('text_cfg', {}))
    length = context_length or text_cfg.get('context_length', 77)
    if text_cfg.get('hf_tokenizer_name'):
        return open_clip.tokenizer.HFTokenizer(
            text_cfg['hf_tokenizer_name'], context_length=length)
    return open_clip.tokenizer.SimpleTokenizer(context_length=length)


@TRANSFORMS.register_module()
class TokenizeCaption(BaseTransform):
    """Tokenise ``caption`` (one) or ``captions`` (a list) to
    ``text_tokens`` (``(L,)`` or ``(n, L)`` int64 token ids).

    Pack with ``dict(type='PackInputs', algorithm_keys=['text_tokens'])``.
    Longer captions are truncated as open_clip truncates them, with a
    count in the log (see the module doc).

    Args:
        model_name: open_clip model name of the text tower.
        model_cfg: open_clip model-config dict instead of a name (the same
            one as the model's ``text_encoder.model_cfg``).
        context_length: Override of the model's context length.
    """

    def __init__(self,
                 model_name: Optional[str] = None,
                 model_cfg: Optional[Dict] = None,
                 context_length: Optional[int] = None) -> None:
        self.tokenizer = build_open_clip_tokenizer(model_name, model_cfg,
                                                   context_length)
        self.model_name = model_name
        self.truncated = CountedWarning(
            f'captions longer than {self.tokenizer.context_length} tokens '
            'truncated as open_clip truncates them')

    def transform(self, results: dict) -> dict:
        if 'caption' in results:
            texts, single = [results['caption']], True
        elif 'captions' in results:
            texts, single = list(results['captions']), False
        else:
            raise KeyError("TokenizeCaption needs 'caption' or 'captions' "
                           f'in the results, found {sorted(results)}')
        for text in texts:
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f'empty caption {text!r} for '
                                 f'{results.get("img_path")}')
        tokens = self.tokenizer(texts)
        tokens = torch.as_tensor(tokens, dtype=torch.long)
        for text, long in zip(texts, over_length(self.tokenizer, texts)):
            if long:
                self.truncated.add(f'{results.get("img_path")}: '
                                   f'{text[:60]!r}...')
        results['text_tokens'] = tokens[0] if single else tokens
        return results

    def __repr__(self) -> str:
        return f'{type(self).__name__}(model_name={self.model_name!r})'
