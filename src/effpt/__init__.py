"""The support library of Effective PyTorch.

The site's pages teach, and each page shows the technique its title promises. This
package holds what a reader installs to run them (``pip install effpt``): device
choice, honest timing and its records, datasets that worker processes must be able to
import, and tested, hardened versions of techniques the pages show in their core form.
Each module covers one concern:

* :mod:`effpt.device`: which device and autocast dtype to use, and a one-line stamp
  of the hardware and versions that produced a page.
* :mod:`effpt.bench`: timing that is correct on every device.
* :mod:`effpt.records`: records of measurements, and speed-ups with their uncertainty.
* :mod:`effpt.expect`: expectations about the machine, measured and printed with a
  verdict, never enforced.
* :mod:`effpt.claims`: the speed-ups the source material reported, stated once, and
  held against the records a page names.
* :mod:`effpt.data`: datasets that DataLoader workers can import (image folders, tar
  shards read exactly once), and writers for the files they read.
* :mod:`effpt.numerics`: numerically stable softmax, log-softmax and cross-entropy.
* :mod:`effpt.viz`: plotting helpers pages share, such as the autograd graph.
* :mod:`effpt.ops`: reference implementations the compilation pages build up to.
* :mod:`effpt.amp`: the checkerboard task and float16 helpers of the mixed-precision pages.
* :mod:`effpt.ddp`: a spawnable DistributedDataParallel worker with bounded timeouts,
  and the process group's setup and teardown.
* :mod:`effpt.profiling`: the profiler's rows of one kind (operators, labels, kernels),
  so that a sum never counts a kernel twice.
* :mod:`effpt.torchscript`: TorchScript's deprecation warnings, silenced where a page
  uses TorchScript on purpose.
"""

from __future__ import annotations

__version__ = "0.4.0"

__all__ = ["__version__"]
