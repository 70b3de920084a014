# LaSt-CLIP B/16: OpenAI CLIP ViT-B/16 fine-tuned with LazyStrike pooling in
# the contrastive loss (recipe: _base_/clip_cc3m.py). Convert the result
# with tools/model_converters/lastclip2mmlocat.py to
# checkpoints/last-clip-vit-b16_mmlocat.pth (configs/ovd/fvit_last-b16_*,
# configs/last/zeroshot_last-clip-b16_*).
_base_ = './_base_/clip_cc3m.py'
