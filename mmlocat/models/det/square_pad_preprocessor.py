"""mmdet's ``DetDataPreprocessor`` that pads test batches to a square.

F-ViT (CLIPSelf, https://arxiv.org/abs/2310.01403) pads every test image to
a square after normalisation (mmdet 2's ``Pad(pad_to_square=True)`` after
``Normalize``), so the frozen ViT always sees a square patch grid; training
batches are padded to the fixed crop size (mmdet's ``BatchFixedSizePad`` in
``batch_augments``). mmdet 3 pads in the pipeline before normalisation,
which would change the padded values; this preprocessor pads after it.
"""
from mmdet.models.data_preprocessors import (BatchFixedSizePad,
                                             DetDataPreprocessor)

from mmlocat.registry import MODELS

__all__ = ['SquarePadDetDataPreprocessor']


@MODELS.register_module()
class SquarePadDetDataPreprocessor(DetDataPreprocessor):
    """``DetDataPreprocessor`` plus square padding of test batches.

    Args:
        test_pad_to_square: Pad each test batch (after normalisation and
            the ``pad_size_divisor`` padding) on the right / bottom with
            ``pad_value`` to a square of its longer side.
        **kwargs: :class:`DetDataPreprocessor` arguments.
    """

    def __init__(self, test_pad_to_square: bool = True, **kwargs) -> None:
        super().__init__(**kwargs)
        self.test_pad_to_square = test_pad_to_square

    def forward(self, data: dict, training: bool = False) -> dict:
        data = super().forward(data, training)
        if training or not self.test_pad_to_square:
            return data
        side = max(data['inputs'].shape[-2:])
        pad = BatchFixedSizePad((side, side), img_pad_value=self.pad_value)
        data['inputs'], data['data_samples'] = pad(data['inputs'],
                                                   data.get('data_samples'))
        return data
