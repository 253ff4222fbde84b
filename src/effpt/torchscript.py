"""TorchScript's deprecation warnings, silenced where a page uses TorchScript on purpose.

Recent releases of PyTorch deprecate :func:`torch.jit.script` and
:func:`torch.jit.trace` (``torch.compile`` and ``torch.export`` replace them) and warn
at every call. A page that compares TorchScript with its replacements calls them on
purpose; :func:`quietly` hides that one warning inside a block and nothing else, and
:func:`script` scripts a function and prints that warning once, for a page that shows
it in passing. The gallery page that moves code from TorchScript to ``torch.compile``
writes the same filter and the same catch out and shows the warning first.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

__all__ = ["DEPRECATION", "quietly", "script"]

#: The start of TorchScript's deprecation message (``re.match`` syntax), e.g.
#: "`torch.jit.script` is deprecated. Please switch to `torch.compile` or `torch.export`."
DEPRECATION = r"`torch\.jit\.\w+` is deprecated"


@contextmanager
def quietly() -> Iterator[None]:
    """Ignore TorchScript's own deprecation warnings, of any category, inside the block.

    Only a warning whose message starts as :data:`DEPRECATION` does and that was raised
    from ``torch.jit`` is ignored: the same words from other code, and every other
    warning, pass. The warning filters are restored when the block ends.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     with quietly():
    ...         warnings.warn("unrelated", UserWarning, stacklevel=1)
    >>> [str(w.message) for w in caught]
    ['unrelated']
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=DEPRECATION, module=r"torch\.jit")
        yield


def script(fn: Callable) -> Callable:
    """:func:`torch.jit.script` of ``fn``, printing the deprecation warning it raised.

    The first of TorchScript's own deprecation warnings is printed as ``Category:
    message``; where this torch raises none, a line says so. Every other warning raised
    while scripting is issued again, so that nothing is lost.

    Examples
    --------
    >>> import torch
    >>> def double(x: torch.Tensor) -> torch.Tensor:
    ...     return 2 * x
    >>> import contextlib, io
    >>> with contextlib.redirect_stdout(io.StringIO()) as said:
    ...     scripted = script(double)
    >>> len(said.getvalue().splitlines()), "deprecat" in said.getvalue()  # one line, either way
    (1, True)
    >>> scripted(torch.ones(2)).tolist()
    [2.0, 2.0]
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scripted = torch.jit.script(fn)
    deprecations = [w for w in caught if re.match(DEPRECATION, str(w.message))]
    for w in deprecations[:1]:
        print(f"{w.category.__name__}: {w.message}")  # noqa: T201  (showing it is the point)
    if not deprecations:
        print(f"torch {torch.__version__} scripts it without a deprecation warning")  # noqa: T201
    for w in caught:
        if w not in deprecations:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return scripted
