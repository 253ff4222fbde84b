"""Shared code of Effective PyTorch.

The gallery pages teach; this package holds what several of them share and what
worker processes must be able to import. Each module covers one concern:

* :mod:`effpt.device`: which device and autocast dtype to use, and a one-line stamp
  of the hardware and versions that produced a page.
* :mod:`effpt.bench`: timing that is correct on every device, and records of it.
* :mod:`effpt.data`: datasets that DataLoader workers can import (image folders, tar
  shards read exactly once), and writers for the files they read.
* :mod:`effpt.numerics`: numerically stable softmax, log-softmax and cross-entropy.
* :mod:`effpt.viz`: plotting helpers pages share, such as the autograd graph.
* :mod:`effpt.ops`: reference implementations the compilation pages build up to.
* :mod:`effpt.amp`: the checkerboard task and float16 helpers of the mixed-precision pages.
* :mod:`effpt.ddp`: a spawnable DistributedDataParallel worker with bounded timeouts.
* :mod:`effpt.gallery`: the hooks sphinx-gallery calls between examples.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
