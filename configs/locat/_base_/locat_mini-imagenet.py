# mini-ImageNet (100 classes) as ImageNet-style class folders:
# data/mini-imagenet/{train,val}/<class>/<image>.
_base_ = './locat_small_data.py'

dataset_type = 'CustomDataset'
train_dataloader = dict(
    dataset=dict(
        _delete_=True,
        type=dataset_type,
        data_root='data/mini-imagenet',
        data_prefix='train',
        pipeline={{_base_.train_pipeline}}))
val_dataloader = dict(
    dataset=dict(
        train_dataloader['dataset'],
        data_prefix='val',
        pipeline={{_base_.test_pipeline}}))
test_dataloader = val_dataloader
