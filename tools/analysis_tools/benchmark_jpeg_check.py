"""What the training loader's corrupt-JPEG check costs next to loading the
image.

``mmlocat.CheckedDataset`` scans every JPEG's marker segments before the
sample loads (:func:`mmlocat.datasets.file_checks.jpeg_corruption`) so a
file libjpeg decodes with a warning is named. This prints, for a JPEG of
the given size written here, the process CPU time of reading + decoding
it as the loader does (``mmcv.imfrombytes``, cv2) and of reading +
scanning it, and their ratio (1 thread; best of ``--rounds``)::

    OMP_NUM_THREADS=1 python tools/analysis_tools/benchmark_jpeg_check.py
"""
import argparse
import os.path as osp
import tempfile
import time

import cv2
import mmcv
import numpy as np
from mmengine import fileio

from mmlocat.datasets.file_checks import jpeg_corruption


def _cpu_ms(step, iters: int, rounds: int) -> float:
    step()
    best = float('inf')
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(iters):
            step()
        best = min(best, (time.process_time() - start) / iters * 1e3)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument(
        '--size', type=int, nargs=2, default=(375, 500), metavar=('H', 'W'))
    parser.add_argument('--quality', type=int, default=90)
    parser.add_argument('--iters', type=int, default=200)
    parser.add_argument('--rounds', type=int, default=3)
    args = parser.parse_args()
    cv2.setNumThreads(1)
    noise = np.random.default_rng(0).random((*args.size, 3)) * 255
    image = cv2.GaussianBlur(noise.astype(np.uint8), (3, 3), 1)
    with tempfile.TemporaryDirectory() as tmp:
        path = osp.join(tmp, 'image.jpg')
        cv2.imwrite(path, image, [cv2.IMWRITE_JPEG_QUALITY, args.quality])
        load = _cpu_ms(lambda: mmcv.imfrombytes(fileio.get(path)), args.iters,
                       args.rounds)
        check = _cpu_ms(lambda: jpeg_corruption(fileio.get(path)), args.iters,
                        args.rounds)
        size = osp.getsize(path)
    print(f'JPEG {args.size[0]}x{args.size[1]}, {size} bytes: '
          f'read + decode {load:.3f} ms, read + check {check:.3f} ms, '
          f'check / load {check / load:.2f}')


if __name__ == '__main__':
    main()
