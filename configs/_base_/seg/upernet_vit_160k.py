# The ViT-UperNet optimisation of upernet_vit_80k.py over mmseg's 160k
# schedule (mmseg::_base_/schedules/schedule_160k.py: validation and
# checkpoints every 16k iterations), as
# mmseg::vit/vit_vit-b16_mln_upernet_8xb2-160k_ade20k-512x512.py.
_base_ = './upernet_vit_80k.py'

_base_.train_cfg.update(max_iters=160000, val_interval=16000)
_base_.default_hooks.checkpoint.interval = 16000
_base_.param_scheduler[1].end = 160000
