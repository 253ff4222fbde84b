"""The source material's speed claims: the one place they are stated.

The measurements page scores each against this build's records
(:func:`effpt_site.measurements.claim_lines`), and the extension's gettext template takes
their text and sources from here (each marked with :func:`~effpt_site.i18n.N_`), so a
claim's Chinese lives in docs/locale/zh_CN/LC_MESSAGES/effpt_site.po like every other
string the extension shows. A claim names the page, the task and the variants whose
records test it: the page must time that task under that name.
"""

from __future__ import annotations

from dataclasses import dataclass

from effpt_site.i18n import N_


@dataclass(frozen=True)
class Claim:
    """A speed claim of the source material and the records that test it like for like.

    ``text`` says the claim as the source made it and ``source`` names the source.
    ``device`` is the device class the source measured on ("cuda", or "cpu" when the
    source's code ran on the CPU) and ``task`` names one size, the same on every device
    the page runs on; a build whose record of that task ran on another device class
    reports the claim as not comparable. ``slow`` and ``fast`` are the variants compared
    (``fast`` may list alternatives separated by "|": the first one recorded counts).
    ``promised`` is the speed-up the source reports. ``optional`` marks a claim whose
    fast variant a page records only where it can run (TorchScript's fuser fuses on CUDA
    only); elsewhere the table says it was not measured.
    """

    text: str
    source: str
    device: str
    page: str
    task: str
    slow: str
    fast: str
    promised: float
    optional: bool = False


GUIDE = N_("the Effective PyTorch guide")
ACDL_NOTEBOOK = N_("Thomas Viehmann's ACDL 2020 notebook")

CLAIMS: list[Claim] = [
    Claim(
        text=N_("Iterating rows with unbind is about 30 % faster than indexing them (500 × 10)"),
        source=GUIDE,
        device="cpu",
        page="plot_overloaded_operators",
        task="row sum 500×10",
        slow="m[i] loop",
        fast="unbind loop",
        promised=1.3,
    ),
    Claim(
        text=N_("One torch.sum is about 100× faster than a loop over the rows (500 × 10)"),
        source=GUIDE,
        device="cpu",
        page="plot_overloaded_operators",
        task="row sum 500×10",
        slow="m[i] loop",
        fast="torch.sum",
        promised=100.0,
    ),
    Claim(
        text=N_(
            "The uniformity loss through a matrix product instead of pdist: "
            "19.4 ms → 2.26 ms (1024 × 128, forward and backward)"
        ),
        source=ACDL_NOTEBOOK,
        device="cuda",
        page="plot_timing_pytorch_code",
        task="uniformity loss, forward + backward",
        slow="pdist",
        fast="matmul",
        promised=19.4 / 2.26,
    ),
    # The guide's batch-gather code moves its offsets with .cuda(): it measured on a GPU.
    Claim(
        text=N_("A TorchScript loop is about 10 % faster than the Python loop (batch gather)"),
        source=GUIDE,
        device="cuda",
        page="plot_batch_gather",
        task="batch gather, batch 4096",
        slow="python loop",
        fast="TorchScript loop",
        promised=1.1,
    ),
    Claim(
        text=N_("A vectorised batch gather is about 100× faster than the loop"),
        source=GUIDE,
        device="cuda",
        page="plot_batch_gather",
        task="batch gather, batch 4096",
        slow="python loop",
        fast="flat + offset",
        promised=100.0,
    ),
    Claim(
        text=N_("TorchScript's fuser takes the box IoU of 100 000 pairs from 238 µs to 40.3 µs"),
        source=ACDL_NOTEBOOK,
        device="cuda",
        page="plot_fusing_elementwise_work",
        # The page's all-threads task: its other thread counts' tasks carry ", 1 thread".
        task="box IoU, 100,000 pairs",
        slow="eager",
        fast="TorchScript fuser",
        promised=238 / 40.3,
        optional=True,
    ),
]
