"""mmlocat: locality-aware ViTs (LocAtViT, LaSt-ViT) for OpenMMLab 2.x."""
import os.path as osp
import re
from setuptools import find_packages, setup

HERE = osp.dirname(osp.abspath(__file__))


def read_version() -> str:
    with open(osp.join(HERE, 'mmlocat', 'version.py')) as f:
        return re.search(r"__version__ = '([^']+)'", f.read()).group(1)


def read_requirements(name: str) -> list:
    with open(osp.join(HERE, 'requirements', name)) as f:
        lines = (line.split('#')[0].strip() for line in f)
        return [line for line in lines if line]


with open(osp.join(HERE, 'README.md')) as f:
    long_description = f.read()

setup(
    name='mmlocat',
    version=read_version(),
    description='LocAtViT and LaSt-ViT backbones and a patch-score neck '
    'for mmpretrain, mmsegmentation and mmdetection',
    long_description=long_description,
    long_description_content_type='text/markdown',
    packages=find_packages(exclude=('configs', 'tools', 'tests')),
    # The real LVIS v1 category list the tiny LVIS writer uses; open_clip's
    # ImageNet class names (MIT, with its licence).
    package_data={
        'mmlocat.testing': ['data/*.json'],
        'mmlocat.datasets': ['data/*.txt', 'data/*.md', 'data/LICENSE.*'],
    },
    python_requires='>=3.8',
    install_requires=read_requirements('runtime.txt'),
    extras_require=dict(tests=read_requirements('tests.txt')),
    license='Apache License 2.0',
    zip_safe=False)
