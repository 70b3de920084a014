"""Zero-shot classification accuracy from class text embeddings.

CLIP's zero-shot protocol (https://arxiv.org/abs/2103.00020): the class of
an image is the class whose prompt-ensembled text embedding (an embedding
file of ``tools/misc/dump_text_embeddings.py`` /
:func:`mmlocat.text.build_class_embeddings`) has the
largest cosine with the image embedding. At build the embedding file's
recorded text model is compared with the CLIP recorded in an image-tower
checkpoint (``clip_checkpoint``, F-ViT's check; ``check_clip=False`` opts
out) and its prompt recipe with ``templates`` / ``prompt_style``; before
evaluating, with the text tower of the model evaluated
(:meth:`ZeroShotAccuracy.check_evaluated_model`, called by
:class:`mmlocat.RecordHook`).
"""
from typing import List, Optional, Sequence, Union

import torch
import torch.nn.functional as F
from mmengine.evaluator import BaseMetric

from mmlocat.registry import METRICS
from mmlocat.text import (TEMPLATE_SETS, load_text_embeddings, read_text_model,
                          resolve_class_names)
from mmlocat.utils.records import (check_clip_pairing, check_prompt_recipe,
                                   check_text_tower_pairing)

__all__ = ['ZeroShotAccuracy']


@METRICS.register_module()
class ZeroShotAccuracy(BaseMetric):
    """Top-k accuracy of ``image_embedding`` vs class text embeddings.

    Args:
        embeddings: ``(C, D)`` ``.npy`` with its class-name sidecar; the names
            are checked against ``class_names`` (or the dataset's
            ``classes``) in order, never reordered.
        class_names: Class names in label order (list, ``.txt`` /
            ``.json`` file, or ``'imagenet_open_clip'`` (open_clip's
            ImageNet names, the ImageNet zero-shot protocol) /
            ``'imagenet_wordnet'`` (mmpretrain's), see
            :func:`mmlocat.text.class_names.imagenet_class_names`), when the
            dataset's ``classes`` are not the embedded names.
        topk: The ``k`` values reported (``zero_shot/top1``, ...).
        clip_checkpoint: An image-tower checkpoint whose ``meta['clip']``
            names the CLIP the embeddings' text model must be (e.g. the
            converted tower the evaluated model starts from); None compares
            nothing.
        check_clip: Compare the text model with ``clip_checkpoint``'s
            record, and with the evaluated model's text tower (the
            explicit opt-out is ``False``, logged).
        templates: The prompt set the embeddings must have been written
            with (a key of ``TEMPLATE_SETS``); None accepts any.
        prompt_style: Their prompt style; None accepts any.
        collect_device: mmengine's ``collect_device``.
        prefix: Metric name prefix.

    Raises:
        FileNotFoundError: No embedding file or sidecar (at build).
        ValueError: Another CLIP or prompt recipe (at build).
    """
    default_prefix = 'zero_shot'

    def __init__(self,
                 embeddings: str,
                 class_names: Union[str, Sequence[str], None] = None,
                 topk: Sequence[int] = (1, ),
                 clip_checkpoint: Optional[str] = None,
                 check_clip: bool = True,
                 templates: Optional[str] = None,
                 prompt_style: Optional[str] = None,
                 collect_device: str = 'cpu',
                 prefix: Optional[str] = None) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix)
        text_model = read_text_model(embeddings)
        check_prompt_recipe(
            text_model, embeddings,
            dict(templates=templates, prompt_style=prompt_style),
            'ZeroShotAccuracy', TEMPLATE_SETS)
        if clip_checkpoint:
            check_clip_pairing(
                text_model,
                embeddings,
                clip_checkpoint,
                'ZeroShotAccuracy',
                'check_clip=False',
                allowed=not check_clip)
        self.embeddings = embeddings
        self.check_clip = check_clip
        self._text_model = text_model
        self.class_names = (
            resolve_class_names(class_names)
            if class_names is not None else None)
        self.topk = tuple(int(k) for k in topk)
        self._text: Optional[torch.Tensor] = None

    def check_evaluated_model(self, model) -> None:
        """Refuse embeddings that the text tower of ``model`` (a
        :class:`mmlocat.CLIPContrastive`, with the weights it holds now:
        the checkpoint tools/test.py loaded) did not encode
        (:func:`mmlocat.utils.records.check_text_tower_pairing`); a model
        without a text tower has nothing to compare."""
        tower = getattr(model, 'text_encoder', None)
        if tower is None or not hasattr(tower, 'fingerprint'):
            return
        check_text_tower_pairing(
            self._text_model,
            self.embeddings,
            tower.fingerprint(),
            f'the evaluated {type(model).__name__}',
            'ZeroShotAccuracy',
            'check_clip=False',
            allowed=not self.check_clip)

    def _class_embeddings(self) -> torch.Tensor:
        if self._text is None:
            names = self.class_names
            if names is None:
                names = list((self.dataset_meta or {}).get('classes') or [])
                if not names:
                    raise ValueError('ZeroShotAccuracy needs class_names or '
                                     "a dataset with metainfo 'classes'")
            emb, _, _ = load_text_embeddings(self.embeddings, names)
            self._text = torch.from_numpy(emb)
        return self._text

    def process(self, data_batch, data_samples: Sequence[dict]) -> None:
        for sample in data_samples:
            if 'image_embedding' not in sample or 'gt_label' not in sample:
                raise KeyError('ZeroShotAccuracy needs image_embedding (a '
                               'CLIPContrastive prediction) and gt_label')
            self.results.append(
                dict(
                    embedding=sample['image_embedding'].float().cpu(),
                    label=int(sample['gt_label'].reshape(-1)[0])))

    def compute_metrics(self, results: List[dict]) -> dict:
        text = self._class_embeddings()
        images = F.normalize(
            torch.stack([r['embedding'] for r in results]), dim=-1)
        if images.shape[1] != text.shape[1]:
            raise ValueError(f'image embeddings have {images.shape[1]} dims, '
                             f'{self.embeddings} has {text.shape[1]}')
        labels = torch.tensor([r['label'] for r in results])
        if int(labels.max()) >= text.shape[0]:
            raise ValueError(f'label {int(labels.max())} but only '
                             f'{text.shape[0]} class embeddings')
        # torch's topk, as open_clip's zero-shot accuracy: classes with the
        # same embedding (a name listed twice) tie the same way
        ranked = (images @ text.T).topk(
            min(max(self.topk), text.shape[0]), dim=1).indices
        hits = ranked == labels[:, None]
        return {
            f'top{k}': float(hits[:, :k].any(dim=1).float().mean()) * 100
            for k in self.topk
        }
