"""mmlocat's registry node: children of the mmengine root registries.

Every registry has ``scope='mmlocat'`` and lazily imports the subpackage that
fills it (``locations``), so ``import mmlocat`` stays cheap and a host config
can name ``type='mmlocat.LocAtViT'`` after
``custom_imports=dict(imports=['mmlocat'])``: the host's registry resolves
the ``mmlocat.`` prefix through the root, which then imports the location.
"""
from mmengine.registry import DATASETS as MMENGINE_DATASETS
from mmengine.registry import HOOKS as MMENGINE_HOOKS
from mmengine.registry import LOOPS as MMENGINE_LOOPS
from mmengine.registry import METRICS as MMENGINE_METRICS
from mmengine.registry import MODEL_WRAPPERS as MMENGINE_MODEL_WRAPPERS
from mmengine.registry import MODELS as MMENGINE_MODELS
from mmengine.registry import \
    OPTIM_WRAPPER_CONSTRUCTORS as MMENGINE_OPTIM_WRAPPER_CONSTRUCTORS
from mmengine.registry import RUNNERS as MMENGINE_RUNNERS
from mmengine.registry import TRANSFORMS as MMENGINE_TRANSFORMS
from mmengine.registry import VISUALIZERS as MMENGINE_VISUALIZERS
from mmengine.registry import \
    WEIGHT_INITIALIZERS as MMENGINE_WEIGHT_INITIALIZERS
from mmengine.registry import Registry

__all__ = [
    'MODELS', 'DATASETS', 'TRANSFORMS', 'METRICS', 'HOOKS',
    'OPTIM_WRAPPER_CONSTRUCTORS', 'VISUALIZERS', 'MODEL_WRAPPERS',
    'WEIGHT_INITIALIZERS', 'LOOPS', 'RUNNERS'
]

MODELS = Registry(
    'model',
    parent=MMENGINE_MODELS,
    scope='mmlocat',
    locations=['mmlocat.models'])
DATASETS = Registry(
    'dataset',
    parent=MMENGINE_DATASETS,
    scope='mmlocat',
    locations=['mmlocat.datasets'])
TRANSFORMS = Registry(
    'transform',
    parent=MMENGINE_TRANSFORMS,
    scope='mmlocat',
    locations=['mmlocat.datasets'])
METRICS = Registry(
    'metric',
    parent=MMENGINE_METRICS,
    scope='mmlocat',
    locations=['mmlocat.evaluation'])
HOOKS = Registry(
    'hook',
    parent=MMENGINE_HOOKS,
    scope='mmlocat',
    locations=['mmlocat.engine'])
LOOPS = Registry(
    'loop',
    parent=MMENGINE_LOOPS,
    scope='mmlocat',
    locations=['mmlocat.engine'])
OPTIM_WRAPPER_CONSTRUCTORS = Registry(
    'optimizer wrapper constructor',
    parent=MMENGINE_OPTIM_WRAPPER_CONSTRUCTORS,
    scope='mmlocat',
    locations=['mmlocat.engine'])
VISUALIZERS = Registry(
    'visualizer',
    parent=MMENGINE_VISUALIZERS,
    scope='mmlocat',
    locations=['mmlocat.visualization'])
MODEL_WRAPPERS = Registry(
    'model_wrapper',
    parent=MMENGINE_MODEL_WRAPPERS,
    scope='mmlocat',
    locations=['mmlocat.engine'])
WEIGHT_INITIALIZERS = Registry(
    'weight initializer',
    parent=MMENGINE_WEIGHT_INITIALIZERS,
    scope='mmlocat',
    locations=['mmlocat.models'])
RUNNERS = Registry(
    'runner',
    parent=MMENGINE_RUNNERS,
    scope='mmlocat',
    locations=['mmlocat.engine'])
