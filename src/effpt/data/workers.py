"""Which start method a page's DataLoader workers use, chosen once for every data page."""

from __future__ import annotations

import multiprocessing
import sys
from types import ModuleType

__all__ = ["start_method"]


def start_method(main: ModuleType | None = None) -> str | None:
    """``"fork"`` where the workers could not import the running code, else ``None``.

    A worker started by ``spawn`` or ``forkserver`` imports the program's main module
    from its file to find the dataset's class. Code run without a file (a notebook, a
    page executed by sphinx-gallery, ``exec``) has none to import, so where the operating
    system offers ``fork`` this returns ``"fork"``: a forked worker is a copy of the
    process and already holds every class defined there. A script run from a file gets
    ``None``, which a :class:`~torch.utils.data.DataLoader` reads as "the platform's
    default start method" (or the one ``multiprocessing.set_start_method`` chose), so it
    runs under fork, forkserver and spawn alike. Where there is no file and no fork
    (Windows), it returns ``None`` too: such code cannot start workers that use its own
    classes: the DataLoader raises "worker ... exited unexpectedly", and the worker's own
    traceback above it names the class it could not find. The page that teaches this choice is
    "Load images in batches with Dataset and DataLoader"; why it is made is explained on
    https://effpt.github.io/effpt/explanations/workers.html ("Guards and start methods").

    ``main`` is the module to ask (default: ``sys.modules["__main__"]``, the module a
    spawned worker would import, as :mod:`multiprocessing` itself decides).

    Examples
    --------
    >>> from types import ModuleType
    >>> script = ModuleType("__main__")
    >>> script.__file__ = "/tmp/plot_page.py"
    >>> start_method(script) is None
    True
    >>> notebook = ModuleType("__main__")  # no __file__, as in a notebook
    >>> start_method(notebook) == ("fork" if "fork" in multiprocessing.get_all_start_methods() else None)
    True
    >>> start_method("__main__")
    Traceback (most recent call last):
    ...
    TypeError: main must be a module or None, got str '__main__'
    """
    if main is None:
        main = sys.modules["__main__"]
    elif not isinstance(main, ModuleType):
        msg = f"main must be a module or None, got {type(main).__name__} {main!r}"
        raise TypeError(msg)
    has_file = getattr(main, "__file__", None) is not None
    if not has_file and "fork" in multiprocessing.get_all_start_methods():
        return "fork"
    return None
