"""Choose the CUDA build of the pinned torch that a GPU runner's driver can run.

The Pages workflow (.github/workflows/pages.yml) runs this before installing torch::

    nvidia-smi | python docs/_tools/torch_cuda.py --torch 2.13.0 --github-env "$GITHUB_ENV"

PyTorch publishes each torch release for a few CUDA versions, each on its own index
(``https://download.pytorch.org/whl/cu128`` ...). The driver's line "CUDA Version: 12.4"
is the newest CUDA it supports. This script takes the newest build not newer than
that which has the pinned torch for this Python; failing that, a newer build of the
same major version, which the driver runs under CUDA's minor-version compatibility
(since CUDA 11: a driver of major version X runs programs built with any X.y, except
features that need a newer driver, such as JIT-compiling PTX of a newer version). A
build is taken only when its index really has the wheel: otherwise pip would quietly
take PyPI's default CUDA build and the GPU check would fail later, misleadingly.

It prints the choice and writes ``PIP_EXTRA_INDEX_URL`` and ``EFFPT_TORCH_BUILD``
(``cu128``) to the file ``--github-env`` names; the workflow's GPU check then compares
``torch.version.cuda`` with it. No fitting build is an error naming the driver's CUDA
version and every index tried. Standard library only.
"""

from __future__ import annotations

import argparse
import re
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence

INDEX = "https://download.pytorch.org/whl"
#: The CUDA builds PyTorch has published torch for, newest first.
BUILDS = ("cu130", "cu129", "cu128", "cu126", "cu124", "cu121", "cu118")


class NoBuild(RuntimeError):
    """No CUDA build of the pinned torch fits the driver (the message says what was tried)."""


def driver_cuda(nvidia_smi: str) -> tuple[int, int]:
    """The newest CUDA version the driver supports, from ``nvidia-smi``'s output.

    Examples
    --------
    >>> driver_cuda("| NVIDIA-SMI 550.54.15  Driver Version: 550.54.15  CUDA Version: 12.4 |")
    (12, 4)
    >>> driver_cuda("no GPU here")
    Traceback (most recent call last):
    ...
    ValueError: nvidia-smi printed no 'CUDA Version: X.Y': no GPU here
    """
    found = re.search(r"CUDA Version:\s*(\d+)\.(\d+)", nvidia_smi)
    if found is None:
        msg = f"nvidia-smi printed no 'CUDA Version: X.Y': {nvidia_smi.strip()[:200]}"
        raise ValueError(msg)
    return int(found.group(1)), int(found.group(2))


def build_version(build: str) -> tuple[int, int]:
    """``cu128`` → (12, 8), ``cu118`` → (11, 8), ``cu130`` → (13, 0).

    Examples
    --------
    >>> build_version("cu128"), build_version("cu130")
    ((12, 8), (13, 0))
    """
    digits = build.removeprefix("cu")
    return int(digits[:-1]), int(digits[-1])


def candidates(driver: tuple[int, int], builds: Sequence[str] = BUILDS) -> list[tuple[str, bool]]:
    """The builds to try, best first, each with whether it needs minor-version compatibility.

    Examples
    --------
    >>> candidates((12, 4))
    [('cu124', False), ('cu121', False), ('cu118', False), ('cu126', True), ('cu128', True), ('cu129', True)]
    >>> candidates((11, 4)), candidates((13, 2))[:2]
    ([('cu118', True)], [('cu130', False), ('cu129', False)])
    """
    native = [(b, False) for b in builds if build_version(b) <= driver]
    same_major = sorted(
        (b for b in builds if build_version(b) > driver and build_version(b)[0] == driver[0]),
        key=build_version,
    )
    return [*native, *((b, True) for b in same_major)]


def has_wheel(index_page: str, torch: str, build: str, python_tag: str) -> bool:
    """Whether a PEP 503 page of torch's files lists torch ``torch+build`` for ``python_tag`` on Linux x86-64.

    Examples
    --------
    >>> page = '<a href="/whl/cu126/torch-2.13.0%2Bcu126-cp311-cp311-manylinux_2_28_x86_64.whl">'
    >>> has_wheel(page, "2.13.0", "cu126", "cp311"), has_wheel(page, "2.13.0", "cu126", "cp312")
    (True, False)
    """
    name = re.escape(f"torch-{torch}") + r"(\+|%2B)" + re.escape(f"{build}-{python_tag}-")
    return re.search(name + r"[^\"'<>]*linux[^\"'<>]*x86_64\.whl", index_page) is not None


def fetch(url: str) -> str:
    """The page at ``url`` (an index page); a network failure raises naming the address."""
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError) as exc:
        msg = f"could not read {url}: {exc}"
        raise NoBuild(msg) from None


def choose(
    driver: tuple[int, int],
    torch: str,
    python_tag: str,
    get: Callable[[str], str] | None = None,
    builds: Sequence[str] = BUILDS,
) -> tuple[str, bool]:
    """The build to install and whether it runs under minor-version compatibility.

    ``get`` reads an index page (default :func:`fetch`; tests pass a fake). An index that lacks the pinned
    torch is skipped; none left raises :class:`NoBuild` naming the driver and the
    indexes tried.
    """
    get = get or fetch
    tried = []
    for build, compat in candidates(driver, builds):
        url = f"{INDEX}/{build}/torch/"
        try:
            page = get(url)
        except NoBuild as exc:
            tried.append(f"{url} ({exc})")
            continue
        if has_wheel(page, torch, build, python_tag):
            return build, compat
        tried.append(f"{url} (no torch {torch} for {python_tag})")
    msg = (
        f"no CUDA build of torch {torch} for {python_tag} runs on this driver, which "
        f"supports CUDA up to {driver[0]}.{driver[1]}; tried: "
        + ("; ".join(tried) or f"no build of CUDA {driver[0]}.x is known ({', '.join(builds)})")
    )
    raise NoBuild(msg)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torch", required=True, help="the pinned torch version, e.g. 2.13.0")
    parser.add_argument("--github-env", help="the file to append PIP_EXTRA_INDEX_URL= to")
    args = parser.parse_args(argv)
    smi = sys.stdin.read()
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    try:
        driver = driver_cuda(smi)
        build, compat = choose(driver, args.torch, tag)
    except (ValueError, NoBuild) as exc:
        print(f"::error::{exc}")
        return 1
    how = (
        f"under CUDA's minor-version compatibility (the driver supports {driver[0]}.{driver[1]})"
        if compat
        else f"natively (the driver supports CUDA up to {driver[0]}.{driver[1]})"
    )
    print(f"Installing torch {args.torch}+{build} from {INDEX}/{build}, which runs {how}")
    if args.github_env:
        with open(args.github_env, "a", encoding="utf-8") as env:  # noqa: PTH123
            env.write(f"PIP_EXTRA_INDEX_URL={INDEX}/{build}\nEFFPT_TORCH_BUILD={build}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
