"""Image-text retrieval recall (R@K), as CLIP / open_clip report it.

Image -> text: an image is a hit at K if any of its captions is among the
K captions most similar to it. Text -> image: a caption is a hit at K if
its image is among the K most similar images (open_clip's
``get_clip_metrics`` on one caption per image; here every caption of the
image counts, as on COCO's 5-caption val set).
"""
from typing import List, Sequence

import torch
from mmengine.evaluator import BaseMetric

from mmlocat.registry import METRICS

__all__ = ['RetrievalRecall']


@METRICS.register_module()
class RetrievalRecall(BaseMetric):
    """R@K image->text and text->image on a caption dataset grouped by
    image (``group_by_image=True``).

    Args:
        topk: The ``K`` values (``retrieval/i2t_R@1``, ``t2i_R@5``, ...).
        collect_device: mmengine's ``collect_device``.
        prefix: Metric name prefix.
    """
    default_prefix = 'retrieval'

    def __init__(self,
                 topk: Sequence[int] = (1, 5, 10),
                 collect_device: str = 'cpu',
                 prefix=None) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix)
        self.topk = tuple(int(k) for k in topk)

    def process(self, data_batch, data_samples: Sequence[dict]) -> None:
        for sample in data_samples:
            if 'text_embeddings' not in sample:
                raise KeyError('RetrievalRecall needs text_embeddings: a '
                               'CLIPContrastive prediction on a caption '
                               'dataset with group_by_image=True')
            self.results.append(
                dict(
                    img_id=int(sample['img_id']),
                    image=sample['image_embedding'].float().cpu(),
                    texts=sample['text_embeddings'].float().cpu()))

    def compute_metrics(self, results: List[dict]) -> dict:
        # distributed samplers may repeat images to fill the last batch
        unique = {r['img_id']: r for r in results}
        items = list(unique.values())
        images = torch.stack([r['image'] for r in items])
        texts = torch.cat([r['texts'] for r in items])
        owner = torch.cat(
            [torch.full((len(r['texts']), ), i) for i, r in enumerate(items)])
        sim = images @ texts.T  # (num_images, num_texts)
        i2t = owner[sim.argsort(dim=1, descending=True)] == torch.arange(
            len(items))[:, None]
        t2i = sim.T.argsort(dim=1, descending=True) == owner[:, None]
        out = {}
        for k in self.topk:
            out[f'i2t_R@{k}'] = float(i2t[:, :k].any(1).float().mean()) * 100
            out[f't2i_R@{k}'] = float(t2i[:, :k].any(1).float().mean()) * 100
        return out
