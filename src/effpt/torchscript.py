"""TorchScript's deprecation warnings, silenced where a page uses TorchScript on purpose.

Recent releases of PyTorch deprecate :func:`torch.jit.script` and
:func:`torch.jit.trace` (``torch.compile`` and ``torch.export`` replace them) and warn
at every call. A page that compares TorchScript with its replacements calls them on
purpose; :func:`quietly` hides that one warning inside a block and nothing else. The
gallery page that moves code from TorchScript to ``torch.compile`` writes the same
filter out and shows the warning first.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["DEPRECATION", "quietly"]

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
